//! What a condition may cost, found at load from its parsed form: the most list items it
//! can visit on one request. CEL has no loops but its list macros (`all`, `exists`,
//! `exists_one`, `map`, `filter`), each visiting its list once per visit of whatever
//! contains it; and `in` and `+` may walk or copy a whole list. A list written in the
//! condition (`['a', 'b'].exists(…)`, `x in ['a', 'b']`) has its own length; any other (the
//! arguments, a claim, the groups) is at most `--policy-max-items` long, which `input.rs`
//! holds every request to. So a rule's worst case is known before it ever runs, and one
//! past `--policy-max-steps` is refused at load. Reading the parsed form, not the text,
//! nothing the parser accepts (spaces before a macro's parenthesis, comments, any string
//! quoting) hides a loop.
//!
//! What is not counted: the work on one string (`contains`, `matches`, `startsWith`) grows
//! with its length, not its count; a request's size bounds it (`docs/policy.md`).

use cel::IdedExpr;
use cel::common::ast::{EntryExpr, Expr};

/// The most list items `expression` can visit (or walk with `in`, or copy with `+`), each
/// list not written in it being at most `max_items` long.
pub fn worst_steps(expression: &IdedExpr, max_items: u64) -> u64 {
    let steps = |e: &IdedExpr| worst_steps(e, max_items);
    let own = match &expression.expr {
        Expr::Comprehension(loop_) => {
            // Its condition and step run once per item; the rest (among `children`) once.
            let items = written_length(&loop_.iter_range).unwrap_or(max_items);
            let per_item = 1u64
                .saturating_add(steps(&loop_.loop_cond))
                .saturating_add(steps(&loop_.loop_step));
            return [&loop_.iter_range, &loop_.accu_init, &loop_.result]
                .into_iter()
                .map(steps)
                .fold(items.saturating_mul(per_item), u64::saturating_add);
        }
        Expr::Call(call) => match (call.func_name.as_str(), call.args.as_slice()) {
            // `x in list`: the list is walked.
            ("@in", [_, list]) => written_length(list).unwrap_or(max_items),
            // `a + b` on lists copies both; on a written scalar it is one step, and so is a
            // macro's own accumulation (`@result + [x]`, counted by its items).
            ("_+_", [a, b]) if !is_scalar(a) && !is_scalar(b) && !is_accumulator(a) => max_items,
            _ => 0,
        },
        _ => 0,
    };
    children(expression)
        .into_iter()
        .map(steps)
        .fold(own, u64::saturating_add)
}

/// The expressions directly inside `expression`, in the order the parser wrote them.
fn children(expression: &IdedExpr) -> Vec<&IdedExpr> {
    match &expression.expr {
        Expr::Comprehension(loop_) => vec![
            &loop_.iter_range,
            &loop_.accu_init,
            &loop_.loop_cond,
            &loop_.loop_step,
            &loop_.result,
        ],
        Expr::Call(call) => call
            .target
            .as_deref()
            .into_iter()
            .chain(&call.args)
            .collect(),
        Expr::Select(select) => vec![&select.operand],
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Map(map) => map
            .entries
            .iter()
            .flat_map(|e| entry_children(&e.expr))
            .collect(),
        Expr::Struct(structure) => structure
            .entries
            .iter()
            .flat_map(|e| entry_children(&e.expr))
            .collect(),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    }
}

/// The expressions of a map entry or a struct field.
fn entry_children(entry: &EntryExpr) -> Vec<&IdedExpr> {
    match entry {
        EntryExpr::StructField(field) => vec![&field.value],
        EntryExpr::MapEntry(pair) => vec![&pair.key, &pair.value],
    }
}

/// The length of a list or map written in the condition.
fn written_length(expression: &IdedExpr) -> Option<u64> {
    match &expression.expr {
        Expr::List(list) => Some(list.elements.len() as u64),
        Expr::Map(map) => Some(map.entries.len() as u64),
        _ => None,
    }
}

/// A list macro's accumulator (the parser names it `@result`; no rule can write `@`).
fn is_accumulator(expression: &IdedExpr) -> bool {
    matches!(&expression.expr, Expr::Ident(name) if name.starts_with('@'))
}

/// A value written in the condition that is not a list or map (a string, a number).
fn is_scalar(expression: &IdedExpr) -> bool {
    matches!(expression.expr, Expr::Literal(_))
}

/// The loop variable of each list macro in `expression` (`xs.all(x, …)` has `x`), one
/// entry per macro.
pub fn loop_variables(expression: &IdedExpr) -> Vec<&str> {
    let mut found = Vec::new();
    if let Expr::Comprehension(loop_) = &expression.expr {
        found.push(loop_.iter_var.as_str());
    }
    for child in children(expression) {
        found.extend(loop_variables(child));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::{loop_variables, worst_steps};

    fn steps(source: &str, max_items: u64) -> u64 {
        let program = cel::Program::compile(source).unwrap();
        worst_steps(program.expression(), max_items)
    }

    #[test]
    fn a_list_from_the_request_counts_as_long_as_allowed_and_a_written_one_as_written() {
        assert_eq!(steps("tool.name == 'x'", 1000), 0);
        assert_eq!(steps("arguments.xs.all(x, x > 0)", 1000), 1000);
        assert_eq!(steps("['a', 'b', 'c'].exists(g, g == server)", 1000), 3);
        assert_eq!(steps("[].all(g, true)", 1000), 0);
        // An index is not a list literal.
        assert_eq!(steps("arguments['xs'].all(x, true)", 1000), 1000);
        // One after the other: added.
        assert_eq!(
            steps(
                "arguments.xs.all(x, x > 0) && principal.groups.exists(g, g == 'a')",
                1000
            ),
            2000
        );
    }

    #[test]
    fn nested_comprehensions_and_walks_multiply() {
        assert_eq!(
            steps("arguments.xs.all(x, arguments.ys.exists(y, y == x))", 1000),
            1000 * 1001
        );
        assert_eq!(
            steps(
                "arguments.paths.all(p, ['/srv', '/tmp'].exists(a, p.startsWith(a)))",
                1000
            ),
            1000 * 3
        );
        assert_eq!(
            steps("arguments.xs.all(x, x in arguments.ys)", 1000),
            1000 * 1001
        );
        assert_eq!(
            steps("arguments.xs.all(x, x in ['a', 'b'])", 1000),
            1000 * 3
        );
        assert_eq!(steps("'admins' in principal.groups", 1000), 1000);
        assert_eq!(
            steps("arguments.xs.map(x, arguments.ys + [x]).size() > 0", 1000),
            1000 * 1001
        );
        assert_eq!(
            steps("arguments.xs.map(x, x).size() > 0", 1000),
            1000,
            "the macro's own accumulation"
        );
        assert_eq!(
            steps("arguments.xs.all(p, (p + '/').startsWith('/srv/'))", 1000),
            1000
        );
        let three = "arguments['a'].all(x, arguments['b'].all(y, arguments['c'].all(z, true)))";
        assert_eq!(steps(three, 1000), 1000 * (1 + 1000 * 1001));
        let four = "a.all(w, b.all(x, c.all(y, d.all(z, true))))";
        assert_eq!(steps(four, u64::MAX), u64::MAX, "saturates, never wraps");
    }

    #[test]
    fn what_the_parser_accepts_hides_no_loop() {
        assert_eq!(steps("tool.name == 'xs.all(x, true)'", 1000), 0);
        assert_eq!(steps("arguments.xs.all (x, true)", 1000), 1000);
        assert_eq!(steps("arguments.xs.all\n(x, true)", 1000), 1000);
        assert_eq!(
            steps(
                "// don't count this\narguments.xs.exists(x, x == '\\'')",
                1000
            ),
            1000
        );
        let program = cel::Program::compile("a.all (x, b.exists(y, true)) && c.map(z, z)").unwrap();
        assert_eq!(loop_variables(program.expression()), ["x", "y", "z"]);
    }
}
