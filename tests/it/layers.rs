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
/// its own children by name, each resolved to the longest module that is a file. An
/// import of one's own parent (`super::Gateway` from a child of `serve/mod.rs`) is the
/// parent's interface to its children, not an arrow of a circle, and is left out.
fn imports_of(file: &Path, modules: &std::collections::BTreeSet<Vec<String>>) -> Vec<Vec<String>> {
    let code = code_of(file);
    let own = module_of(file);
    let is_folder = file.file_name().is_some_and(|n| n == "mod.rs");
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
        for line in code.lines().map(str::trim) {
            if let Some(rest) = line
                .strip_prefix("use ")
                .or_else(|| line.strip_prefix("pub use "))
            {
                let first = rest.split("::").next().unwrap_or_default();
                let mut child = own.clone();
                child.push(first.to_owned());
                if modules.contains(&child) {
                    named.push(
                        child
                            .into_iter()
                            .chain(rest.split("::").skip(1).map(str::to_owned))
                            .collect(),
                    );
                }
            }
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
        // Not itself, and not one of its own ancestors.
        if module == own || own.starts_with(&module) {
            continue;
        }
        if !resolved.contains(&module) {
            resolved.push(module);
        }
    }
    resolved
}

/// A circle in `graph`, if there is one: the modules on it.
fn find_circle(
    graph: &std::collections::BTreeMap<Vec<String>, Vec<Vec<String>>>,
) -> Option<Vec<Vec<String>>> {
    fn visit(
        node: &Vec<String>,
        graph: &std::collections::BTreeMap<Vec<String>, Vec<Vec<String>>>,
        on_path: &mut Vec<Vec<String>>,
        done: &mut std::collections::BTreeSet<Vec<String>>,
    ) -> Option<Vec<Vec<String>>> {
        if let Some(at) = on_path.iter().position(|n| n == node) {
            return Some(on_path[at..].to_vec());
        }
        if done.contains(node) {
            return None;
        }
        on_path.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(circle) = visit(next, graph, on_path, done) {
                return Some(circle);
            }
        }
        on_path.pop();
        done.insert(node.clone());
        None
    }
    let mut done = std::collections::BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_import_circle_anywhere_in_src() {
    let files = rust_files(&src());
    let modules: std::collections::BTreeSet<Vec<String>> =
        files.iter().map(|f| module_of(f)).collect();
    let graph: std::collections::BTreeMap<Vec<String>, Vec<Vec<String>>> = files
        .iter()
        .map(|f| (module_of(f), imports_of(f, &modules)))
        .collect();
    // The scan sees real arrows (the relay's engine imports its link), so the rule is not vacuous.
    assert!(
        graph[&vec!["relay".to_owned(), "call".to_owned()]].contains(&vec![
            "relay".to_owned(),
            "link".to_owned(),
            "session".to_owned()
        ])
    );
    if let Some(circle) = find_circle(&graph) {
        let names: Vec<String> = circle.iter().map(|m| m.join("::")).collect();
        panic!("an import circle: {}", names.join(" -> "));
    }
    // And a circle is found where there is one.
    let a = vec!["a".to_owned()];
    let b = vec!["b".to_owned()];
    let looped = std::collections::BTreeMap::from([
        (a.clone(), vec![b.clone()]),
        (b.clone(), vec![a.clone()]),
    ]);
    assert!(find_circle(&looped).is_some());
}
