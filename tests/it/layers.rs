//! The layering rules of `docs/architecture.md`, read off the source as text: a rule
//! broken by a new import fails here, before anyone has to notice it in review.
//!
//! - `era/` and `jsonrpc/` use nothing of the crate outside themselves (the ground floor);
//! - `relay/` and `serve/` never import each other;
//! - `sandbox/tools/` knows nothing of JSON-RPC;
//! - inside `relay/`, no file imports from a higher tier than its own;
//! - the relay sends requests only through its link and its one request engine;
//! - `requestState` tokens are made and checked only in `parking/`;
//! - no import circle anywhere in `src/`.

use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
    found.sort();
    found
}

/// The file's code without comments (a path in a doc comment is not an import).
fn code_of(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The crate modules a file names (`crate::X::…` gives `X`), with the text that named it.
fn crate_paths(code: &str, prefix: &str) -> Vec<String> {
    let mut named = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let after = &rest[at + prefix.len()..];
        let end = after
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        named.push(after[..end].to_owned());
        rest = &after[end..];
    }
    named
}

fn relative(path: &Path) -> String {
    path.strip_prefix(src())
        .unwrap()
        .to_string_lossy()
        .replace('\\', "/")
}

#[test]
fn the_ground_floor_uses_nothing_above_it() {
    let mut broken = Vec::new();
    for floor in ["era", "jsonrpc"] {
        for file in rust_files(&src().join(floor)) {
            for module in crate_paths(&code_of(&file), "crate::") {
                if module != floor {
                    broken.push(format!("{} uses crate::{module}", relative(&file)));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{broken:#?}");
}

#[test]
fn relay_and_serve_never_import_each_other() {
    let mut broken = Vec::new();
    for (mode, other) in [("relay", "serve"), ("serve", "relay")] {
        for file in rust_files(&src().join(mode)) {
            if crate_paths(&code_of(&file), "crate::").contains(&other.to_owned()) {
                broken.push(format!("{} uses crate::{other}", relative(&file)));
            }
        }
    }
    assert!(broken.is_empty(), "{broken:#?}");
}

#[test]
fn the_sandbox_tools_know_nothing_of_json_rpc() {
    let mut broken = Vec::new();
    for file in rust_files(&src().join("sandbox/tools")) {
        let code = code_of(&file);
        if crate_paths(&code, "crate::").iter().any(|m| m == "jsonrpc") || code.contains("jsonrpc")
        {
            broken.push(relative(&file));
        }
    }
    assert!(broken.is_empty(), "{broken:#?}");
}

/// The relay's tiers, lowest first (`docs/architecture.md`, "The relay's tiers").
fn relay_tier(module: &str) -> usize {
    match module {
        "config" | "request" | "gate" | "cancel" | "route" | "methods" | "input" | "tool_table"
        | "eras" => 1,
        "link" => 2,
        "context" | "call" | "detect" | "lane" => 3,
        "paths" => 4,
        "dispatch" | "mod" => 5,
        other => panic!("relay/{other} has no tier: add it to relay_tier and the architecture doc"),
    }
}

#[test]
fn relay_tiers_only_import_downward() {
    let relay = src().join("relay");
    let mut broken = Vec::new();
    for file in rust_files(&relay) {
        let inside = file.strip_prefix(&relay).unwrap();
        let parts: Vec<String> = inside
            .iter()
            .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
            .collect();
        // A file in a folder belongs to the folder's tier.
        let own = parts[0].clone();
        let own_tier = relay_tier(&own);
        let code = code_of(&file);
        let mut named = crate_paths(&code, "crate::relay::");
        // `super::X` from a top-level file names relay/X; from inside a folder it names a
        // sibling (same tier), and `super::super::X` names relay/X.
        if parts.len() == 1 && own == "mod" {
            // relay/mod.rs: `super::` is the crate root, outside the relay.
        } else if parts.len() == 1 || parts[1] == "mod" {
            named.extend(crate_paths(&code, "super::"));
        } else {
            named.extend(crate_paths(&code, "super::super::"));
        }
        for module in named {
            if module.is_empty() || module == "super" || module == own {
                continue;
            }
            let tier = relay_tier(&module);
            if tier > own_tier {
                broken.push(format!(
                    "relay/{} (tier {own_tier}) imports relay::{module} (tier {tier})",
                    inside.display()
                ));
            }
        }
    }
    assert!(broken.is_empty(), "{broken:#?}");
}

/// Files whose code contains any of `needles`, outside the files `allowed` names.
fn uses_outside(dir: &Path, needles: &[&str], allowed: &[&str]) -> Vec<String> {
    rust_files(dir)
        .into_iter()
        .filter(|file| !allowed.contains(&relative(file).as_str()))
        .filter(|file| {
            let code = code_of(file);
            needles.iter().any(|needle| code.contains(needle))
        })
        .map(|file| relative(&file))
        .collect()
}

#[test]
fn the_relay_sends_through_its_link_and_one_engine() {
    // The session's own POST and GET, called only by the link, the engine (a stream's
    // resumption), and the era probe (a POST whose answer decides the era, not a request).
    let raw = uses_outside(
        &src().join("relay"),
        &[".post_as(", ".post_to(", "upstream.post(", "upstream.get("],
        &[
            "relay/call.rs",
            "relay/detect.rs",
            "relay/link/mod.rs",
            "relay/link/server_stream.rs",
            "relay/link/sse.rs",
            "relay/link/session/mod.rs",
            "relay/link/session/send.rs",
        ],
    );
    assert!(raw.is_empty(), "send through call::call or Link: {raw:#?}");
}

#[test]
fn request_state_is_made_and_checked_only_in_parking() {
    let outside = uses_outside(&src(), &["state_token::"], &["parking/table.rs"]);
    assert!(outside.is_empty(), "use parking::Rounds: {outside:#?}");
}

#[test]
fn the_rules_can_fail() {
    // The scanner must see an import, or every rule above would pass vacuously.
    let code = "use crate::relay::paths::legacy;\nlet x = super::dispatch::Relay; // crate::serve";
    assert_eq!(crate_paths(code, "crate::relay::"), ["paths"]);
    assert_eq!(crate_paths(code, "super::"), ["dispatch"]);
    assert_eq!(relay_tier("gate"), 1);
    assert!(relay_tier("paths") > relay_tier("call"));
    let without_comments: String = code
        .lines()
        .map(|l| l.find("//").map_or(l, |at| &l[..at]))
        .collect();
    assert!(!without_comments.contains("crate::serve"));
    // The scan sees the real call sites it allows, so the rule is not vacuous.
    assert!(!uses_outside(&src().join("relay"), &[".post_as("], &[]).is_empty());
    assert!(!uses_outside(&src(), &["state_token::"], &[]).is_empty());
}

/// The module a file is (`serve/auth/jwt.rs` → `serve::auth::jwt`, a `mod.rs` its folder).
fn module_of(file: &Path) -> Vec<String> {
    let inside = file.strip_prefix(src()).unwrap();
    let mut parts: Vec<String> = inside
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// The file modules a file imports: `crate::…` and `super::…` paths, and (from a `mod.rs`)
/// its own children's paths (`child::Item`), each resolved to the longest module that is a file. An
/// import of one's own parent (`super::Gateway` from a child of `serve/mod.rs`) counts
/// like any other: a parent that also uses the child makes a circle.
fn imports_of(file: &Path, modules: &std::collections::BTreeSet<Vec<String>>) -> Vec<Vec<String>> {
    // A file's unit tests (`#[cfg(test)] mod tests`, at its end) are not part of the house,
    // and their `super::` is the file itself.
    let whole = code_of(file);
    let code = whole
        .find("#[cfg(test)]\nmod ")
        .map_or(whole.as_str(), |at| &whole[..at])
        .to_owned();
    let own = module_of(file);
    let is_folder = file
        .file_name()
        .is_some_and(|n| n == "mod.rs" || n == "lib.rs");
    // `super` of a module is its parent, whether the module is a file or a folder.
    let up = |n: usize| own[..own.len().saturating_sub(n)].to_vec();
    let mut named: Vec<Vec<String>> = Vec::new();
    let mut paths = |prefix: &str, base: &[String]| {
        let mut rest = code.as_str();
        while let Some(at) = rest.find(prefix) {
            let before = rest[..at].chars().last();
            let after = &rest[at + prefix.len()..];
            rest = after;
            // Part of a longer path (`a::crate::`, or the inner `super::` of `super::super::`).
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
                || after.starts_with("super::")
            {
                continue;
            }
            let segments = after
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .next()
                .unwrap_or_default()
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_owned);
            named.push(base.iter().cloned().chain(segments).collect());
        }
    };
    paths("crate::", &[]);
    paths("super::super::", &up(2));
    paths("super::", &up(1));
    if is_folder {
        // A folder's `mod.rs` names its children without `super::` or `crate::`.
        let children = modules
            .iter()
            .filter(|m| m.len() == own.len() + 1 && m.starts_with(&own))
            .cloned();
        for child in children {
            let name = format!("{}::", child.last().unwrap());
            paths(&name, &child);
        }
    }
    let mut resolved = Vec::new();
    for path in named {
        let Some(module) = (1..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|m| modules.contains(m))
        else {
            continue;
        };
        // Not itself.
        if module == own {
            continue;
        }
        if !resolved.contains(&module) {
            resolved.push(module);
        }
    }
    resolved
}

type Graph = std::collections::BTreeMap<Vec<String>, Vec<Vec<String>>>;

/// Every file module of `src/` with the file modules it imports.
fn import_graph() -> Graph {
    let files = rust_files(&src());
    let modules: std::collections::BTreeSet<Vec<String>> =
        files.iter().map(|f| module_of(f)).collect();
    files
        .iter()
        .map(|f| (module_of(f), imports_of(f, &modules)))
        .collect()
}

/// Every group of modules that import each other round a circle (Tarjan's strongly
/// connected components of more than one module), each as `a::b -> c::d` arrows inside it.
fn tangles(graph: &Graph) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g Graph,
        index: std::collections::BTreeMap<&'g Vec<String>, (usize, usize)>,
        stack: Vec<&'g Vec<String>>,
        found: Vec<Vec<&'g Vec<String>>>,
    }
    fn visit<'g>(walk: &mut Walk<'g>, node: &'g Vec<String>) {
        let n = walk.index.len();
        walk.index.insert(node, (n, n));
        walk.stack.push(node);
        for next in walk.graph.get(node).into_iter().flatten() {
            let Some((next, _)) = walk.graph.get_key_value(next) else {
                continue;
            };
            match walk.index.get(next).copied() {
                None => {
                    visit(walk, next);
                    let low = walk.index[next].1.min(walk.index[node].1);
                    walk.index.get_mut(node).unwrap().1 = low;
                }
                Some((at, _)) if walk.stack.contains(&next) => {
                    let low = at.min(walk.index[node].1);
                    walk.index.get_mut(node).unwrap().1 = low;
                }
                Some(_) => {}
            }
        }
        let (at, low) = walk.index[node];
        if at == low {
            let from = walk.stack.iter().position(|n| *n == node).unwrap();
            let group: Vec<_> = walk.stack.drain(from..).collect();
            if group.len() > 1 {
                walk.found.push(group);
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: Default::default(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !walk.index.contains_key(node) {
            visit(&mut walk, node);
        }
    }
    walk.found
        .iter()
        .map(|group| {
            let mut arrows = Vec::new();
            for from in group {
                for to in &graph[*from] {
                    if group.contains(&to) {
                        arrows.push(format!("{} -> {}", from.join("::"), to.join("::")));
                    }
                }
            }
            arrows
        })
        .collect()
}

#[test]
fn no_import_circle_anywhere_in_src() {
    // Here a folder's children may use what its `mod.rs` declares (the folder's face to
    // them); the rooms of the modes themselves are held to more below.
    let graph: Graph = import_graph()
        .into_iter()
        .map(|(module, imports)| {
            let kept = imports
                .into_iter()
                .filter(|import| !module.starts_with(import))
                .collect();
            (module, kept)
        })
        .collect();
    // The scan sees real arrows (the relay's engine imports its link), so the rule is not vacuous.
    assert!(
        graph[&vec!["relay".to_owned(), "call".to_owned()]].contains(&vec![
            "relay".to_owned(),
            "link".to_owned(),
            "session".to_owned()
        ])
    );
    let tangled = tangles(&graph);
    assert!(tangled.is_empty(), "import circles: {tangled:#?}");
    // And a circle is found where there is one.
    let a = vec!["a".to_owned()];
    let b = vec!["b".to_owned()];
    let looped = std::collections::BTreeMap::from([
        (a.clone(), vec![b.clone()]),
        (b.clone(), vec![a.clone()]),
    ]);
    assert!(!tangles(&looped).is_empty());
}

/// `graph` as `look` draws the folder `dir`: each file or folder directly inside it is one
/// room (the folder's own `mod.rs` is the room `mod`), with the arrows between rooms.
fn rooms_of(graph: &Graph, dir: &[&str]) -> Graph {
    let room = |module: &Vec<String>| -> Option<Vec<String>> {
        let inside =
            module.strip_prefix(&dir.iter().map(|s| s.to_string()).collect::<Vec<_>>()[..])?;
        Some(vec![
            inside.first().cloned().unwrap_or_else(|| "mod".to_owned()),
        ])
    };
    let mut rooms = Graph::new();
    for (from, imports) in graph {
        let Some(from_room) = room(from) else {
            continue;
        };
        let arrows = rooms.entry(from_room.clone()).or_default();
        for to_room in imports.iter().filter_map(room) {
            if to_room != from_room && !arrows.contains(&to_room) {
                arrows.push(to_room);
            }
        }
    }
    rooms
}

#[test]
fn the_modes_are_houses_without_arrows_back_up() {
    // A floor plan with rooms on floors has no arrow running back up exactly when the rooms'
    // arrows make no circle; a parent's `mod.rs` is a room like any other.
    let graph = import_graph();
    for dir in [&["relay"][..], &["serve"], &["authserver"]] {
        let rooms = rooms_of(&graph, dir);
        assert!(rooms.len() > 3, "{dir:?} has rooms");
        let tangled = tangles(&rooms);
        assert!(
            tangled.is_empty(),
            "src/{} has arrows back up among these rooms: {tangled:#?}",
            dir.join("/")
        );
    }
    // A planted violation is seen: the stdio child importing the front door.
    let mut planted = graph.clone();
    let child = vec!["serve".to_owned(), "child".to_owned()];
    planted
        .get_mut(&child)
        .expect("serve/child.rs exists")
        .push(vec!["serve".to_owned(), "front".to_owned()]);
    assert!(!tangles(&rooms_of(&planted, &["serve"])).is_empty());
}

/// The functions of `code` longer than `most` lines, as `name (lines)`: from a line that
/// opens a `fn` to the line that closes it at the same indentation.
fn long_functions(code: &str, most: usize) -> Vec<String> {
    let lines: Vec<&str> = code.lines().collect();
    let mut long = Vec::new();
    for (at, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let opens = [
            "fn ",
            "pub fn ",
            "async fn ",
            "pub async fn ",
            "pub(super) fn ",
            "pub(super) async fn ",
            "pub(crate) fn ",
            "pub(crate) async fn ",
            "const fn ",
            "pub const fn ",
        ]
        .iter()
        .find_map(|prefix| trimmed.strip_prefix(prefix));
        let Some(rest) = opens else { continue };
        let indent = &line[..line.len() - trimmed.len()];
        let close = format!("{indent}}}");
        let Some(length) = lines[at..]
            .iter()
            .position(|l| l.trim_end() == close)
            .map(|end| end + 1)
        else {
            continue;
        };
        // A declaration without a body (in a trait) ends at its `;` before any `}`.
        let declared = lines[at..at + length]
            .iter()
            .any(|l| l.trim_end().ends_with(';'))
            && !lines[at..at + length].iter().any(|l| l.contains('{'));
        if length > most && !declared {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            long.push(format!("{name} ({length} lines)"));
        }
    }
    long
}

#[test]
fn files_and_functions_stay_small() {
    // A newcomer reads a file in one sitting and a function on one screen or two
    // (docs/architecture.md, "Size limits"; an exception would be listed there, and here).
    const MOST_LINES_IN_A_FILE: usize = 500;
    const MOST_LINES_IN_A_FUNCTION: usize = 100;
    let mut broken = Vec::new();
    for file in rust_files(&src()) {
        let code = std::fs::read_to_string(&file).unwrap();
        let lines = code.lines().count();
        if lines > MOST_LINES_IN_A_FILE {
            broken.push(format!("{} has {lines} lines", relative(&file)));
        }
        for long in long_functions(&code, MOST_LINES_IN_A_FUNCTION) {
            broken.push(format!("{}: {long}", relative(&file)));
        }
    }
    assert!(
        broken.is_empty(),
        "split these by what they do: {broken:#?}"
    );
    // The scan sees a long function where there is one.
    let planted = format!(
        "    pub async fn planted() {{\n{}    }}\n",
        "        step();\n".repeat(120)
    );
    assert_eq!(long_functions(&planted, 100), ["planted (122 lines)"]);
    assert!(long_functions("fn short() {\n}\n", 100).is_empty());
}
