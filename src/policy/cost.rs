//! What a condition may cost, found at load: the most items its comprehensions can visit.
//! CEL has no loops but `all`, `exists`, `exists_one`, `map` and `filter`, and each
//! visits its list once per visit of the comprehensions it sits in. A list written in the
//! condition (`['a', 'b'].exists(…)`) has its own length; any other list (the arguments,
//! a claim) is at most `--policy-max-items` long, which `input.rs` holds every request to.
//! So a rule's worst case is known before it ever runs, and one past `--policy-max-steps`
//! is refused at load.

/// CEL's list macros: each visits its list.
pub(super) const COMPREHENSIONS: [&str; 6] =
    ["all", "exists", "exists_one", "existsOne", "map", "filter"];

/// One comprehension in the source: where its parentheses open and close, and how many
/// items its list can have.
#[derive(Debug)]
struct Loop {
    open: usize,
    close: usize,
    items: u64,
}

/// The most items the comprehensions of `source` can visit, each list other than one
/// written in it being at most `max_items` long.
pub fn worst_steps(source: &str, max_items: u64) -> u64 {
    let brackets = Brackets::of(source);
    let loops: Vec<Loop> = comprehensions(source)
        .into_iter()
        .filter_map(|(dot, open)| {
            let close = brackets.closing(open)?;
            let items = brackets
                .literal_list_ending_at(dot.checked_sub(1)?)
                .unwrap_or(max_items);
            Some(Loop { open, close, items })
        })
        .collect();
    loops
        .iter()
        .map(|inner| {
            loops
                .iter()
                .filter(|outer| outer.open <= inner.open && inner.close <= outer.close)
                .fold(1u64, |steps, l| steps.saturating_mul(l.items))
        })
        .fold(0u64, u64::saturating_add)
}

/// Where each comprehension's `.name(` is: the dot and the opening parenthesis.
fn comprehensions(source: &str) -> Vec<(usize, usize)> {
    let code = outside_strings(source);
    let mut found = Vec::new();
    for name in COMPREHENSIONS {
        let needle = format!(".{name}(");
        let mut from = 0;
        while let Some(at) = source[from..].find(&needle) {
            let dot = from + at;
            if code[dot] {
                found.push((dot, dot + needle.len() - 1));
            }
            from = dot + needle.len();
        }
    }
    found
}

/// Which bytes of `source` are code, not inside a string literal.
fn outside_strings(source: &str) -> Vec<bool> {
    let (mut quote, mut escaped) = (None, false);
    source
        .bytes()
        .map(|b| match quote {
            Some(q) => {
                match b {
                    _ if escaped => escaped = false,
                    b'\\' => escaped = true,
                    _ if b == q => quote = None,
                    _ => {}
                }
                false
            }
            None => {
                if matches!(b, b'"' | b'\'') {
                    quote = Some(b);
                    false
                } else {
                    true
                }
            }
        })
        .collect()
}

/// The brackets of a source outside its strings: each opening one's closing one, and each
/// `[…]` list's number of items.
struct Brackets {
    closing: Vec<(usize, usize)>,
    lists: Vec<(usize, u64)>,
}

impl Brackets {
    fn of(source: &str) -> Brackets {
        let code = outside_strings(source);
        let bytes = source.as_bytes();
        // (where it opened, commas at its own level, anything in it yet)
        let mut open: Vec<(usize, u64, bool)> = Vec::new();
        let (mut closing, mut lists) = (Vec::new(), Vec::new());
        for (at, &b) in bytes.iter().enumerate() {
            if !code[at] {
                if let Some(top) = open.last_mut() {
                    top.2 = true;
                }
                continue;
            }
            match b {
                b'(' | b'[' | b'{' => {
                    if let Some(top) = open.last_mut() {
                        top.2 = true;
                    }
                    open.push((at, 0, false));
                }
                b')' | b']' | b'}' => {
                    if let Some((start, commas, filled)) = open.pop() {
                        closing.push((start, at));
                        if b == b']' {
                            lists.push((at, if filled { commas + 1 } else { 0 }));
                        }
                    }
                }
                b',' => {
                    if let Some(top) = open.last_mut() {
                        top.1 += 1;
                    }
                }
                b if b.is_ascii_whitespace() => {}
                _ => {
                    if let Some(top) = open.last_mut() {
                        top.2 = true;
                    }
                }
            }
        }
        Brackets { closing, lists }
    }

    fn closing(&self, open: usize) -> Option<usize> {
        self.closing
            .iter()
            .find(|(start, _)| *start == open)
            .map(|(_, end)| *end)
    }

    /// The items of the list literal whose `]` is at `end`, if one ends there (a trailing
    /// comma counts one too many: the estimate errs high, never low).
    fn literal_list_ending_at(&self, end: usize) -> Option<u64> {
        self.lists
            .iter()
            .find(|(at, _)| *at == end)
            .map(|(_, items)| *items)
    }
}

#[cfg(test)]
mod tests {
    use super::worst_steps;

    #[test]
    fn a_list_from_the_request_counts_as_long_as_allowed_and_a_written_one_as_written() {
        assert_eq!(worst_steps("tool.name == 'x'", 1000), 0);
        assert_eq!(worst_steps("arguments.xs.all(x, x > 0)", 1000), 1000);
        assert_eq!(
            worst_steps("['a', 'b', 'c'].exists(g, g == server)", 1000),
            3
        );
        assert_eq!(worst_steps("[].all(g, true)", 1000), 0);
        // One after the other: added.
        assert_eq!(
            worst_steps(
                "arguments.xs.all(x, x > 0) && principal.groups.exists(g, g == 'a')",
                1000
            ),
            2000
        );
    }

    #[test]
    fn nested_comprehensions_multiply() {
        assert_eq!(
            worst_steps("arguments.xs.all(x, arguments.ys.exists(y, y == x))", 1000),
            1000 + 1000 * 1000
        );
        assert_eq!(
            worst_steps(
                "arguments.paths.all(p, ['/srv', '/tmp'].exists(a, p.startsWith(a)))",
                1000
            ),
            1000 + 2000
        );
        let four = "a.all(w, b.all(x, c.all(y, d.all(z, true))))";
        assert_eq!(
            worst_steps(four, 1000),
            1000 + 1_000_000 + 1_000_000_000 + 1_000_000_000_000
        );
        assert_eq!(
            worst_steps(four, u64::MAX),
            u64::MAX,
            "saturates, never wraps"
        );
    }

    #[test]
    fn a_comprehension_spelled_inside_a_string_is_text() {
        assert_eq!(worst_steps("tool.name == 'xs.all(x, true)'", 1000), 0);
        assert_eq!(
            worst_steps(
                r#"arguments.q == "[1, 2].all(" && ['(', ')'].exists(c, c == 'x')"#,
                1000
            ),
            2
        );
    }
}
