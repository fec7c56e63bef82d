//! The aggregate endpoint's names: each backend's tools and prompts are published as the
//! server's name, a separator, then the backend's name, always (one server or many, so no
//! name changes when a server is added), and routed back through an exact table: never by
//! splitting a name, since a tool's name may hold the separator itself.

use std::collections::HashMap;

/// Between the server's name and the tool's. Two underscores keep every published name
/// within the rule hosts enforce and read as one break: `github__create_issue`.
pub const DEFAULT_SEPARATOR: &str = "__";

/// The longest name hosts accept (Claude Desktop and the model APIs behind the hosts check
/// `^[a-zA-Z0-9_-]{1,64}$`).
pub const MAX_NAME: usize = 64;

/// Whether `name` passes `^[a-zA-Z0-9_-]{1,64}$`.
pub fn fits_host_rule(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Checks a separator given on the command line or in the file.
pub fn check_separator(separator: &str) -> Result<(), String> {
    let fits =
        (1..=4).contains(&separator.len()) && separator.bytes().all(|b| b == b'_' || b == b'-');
    if fits {
        Ok(())
    } else {
        Err(format!(
            "the separator {separator:?} cannot be used: names must stay within letters, digits, '_' and '-', so use 1 to 4 of '_' and '-' (the default is {DEFAULT_SEPARATOR:?})"
        ))
    }
}

/// Checks the aggregate's server names at load. A server whose name holds the separator
/// would publish names that read as another server's, and one whose name leaves no room
/// within 64 characters could publish nothing.
pub fn check_server_names(servers: &[String], separator: &str) -> Result<(), String> {
    for server in servers {
        if server.contains(separator) {
            return Err(format!(
                "server {server:?} holds the separator {separator:?}, so its tools would read as another server's: rename the server, or choose another separator"
            ));
        }
        if server.len() + separator.len() >= MAX_NAME {
            return Err(format!(
                "server {server:?} leaves no room for a tool's name within {MAX_NAME} characters once the separator is added: use a shorter name"
            ));
        }
    }
    Ok(())
}

/// Published names chosen by hand, from the config file: (server, the backend's name) to
/// the name clients see.
pub type Aliases = HashMap<(String, String), String>;

/// A backend's name that was not published, and why (with what would fix it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub server: String,
    pub name: String,
    pub why: String,
}

/// Which server and which of its names each published name stands for, and the way back.
#[derive(Debug, Default, Clone)]
pub struct NameTable {
    routes: HashMap<String, (usize, String)>,
    published: HashMap<(usize, String), String>,
}

impl NameTable {
    /// Publishes the names each server listed (`listed[i]` for `servers[i]`). A name that
    /// would break the hosts' rule, and every name of a collision, is refused: published
    /// under none of the colliding names, since no choice between them would be right.
    pub fn build(
        servers: &[String],
        listed: &[Vec<String>],
        separator: &str,
        aliases: &Aliases,
    ) -> (NameTable, Vec<Refused>) {
        let mut refused = Vec::new();
        let mut claims: HashMap<String, Vec<(usize, &str)>> = HashMap::new();
        let mut order = Vec::new();
        for (index, names) in listed.iter().enumerate() {
            let server = &servers[index];
            for name in names {
                let public = aliases
                    .get(&(server.clone(), name.clone()))
                    .cloned()
                    .unwrap_or_else(|| format!("{server}{separator}{name}"));
                if !fits_host_rule(&public) {
                    refused.push(Refused {
                        server: server.clone(),
                        name: name.clone(),
                        why: format!(
                            "it would be published as {public:?}, which hosts refuse (1 to {MAX_NAME} letters, digits, '_' or '-'): give it an alias in the config file, [servers.{server}.aliases] {name:?} = \"a_shorter_name\""
                        ),
                    });
                    continue;
                }
                let claimants = claims.entry(public.clone()).or_default();
                if claimants.contains(&(index, name.as_str())) {
                    continue; // a backend that lists a name twice still has one tool
                }
                if claimants.is_empty() {
                    order.push(public);
                }
                claimants.push((index, name.as_str()));
            }
        }
        let mut table = NameTable::default();
        for public in order {
            let claimants = &claims[&public];
            if let [(index, name)] = claimants[..] {
                table
                    .published
                    .insert((index, name.to_owned()), public.clone());
                table.routes.insert(public, (index, name.to_owned()));
                continue;
            }
            for (at, &(index, name)) in claimants.iter().enumerate() {
                let others: Vec<String> = claimants
                    .iter()
                    .enumerate()
                    .filter(|(other, _)| *other != at)
                    .map(|(_, (i, n))| format!("{:?} of server {:?}", n, servers[*i]))
                    .collect();
                refused.push(Refused {
                    server: servers[index].clone(),
                    name: name.to_owned(),
                    why: format!(
                        "it would be published as {public:?}, as would {}: give one of them an alias in the config file, [servers.{}.aliases] {name:?} = \"another_name\"",
                        others.join(" and "),
                        servers[index]
                    ),
                });
            }
        }
        (table, refused)
    }

    /// The server (its index) and the backend's own name behind a published name.
    pub fn route(&self, public: &str) -> Option<(usize, &str)> {
        self.routes
            .get(public)
            .map(|(index, name)| (*index, name.as_str()))
    }

    /// The name a server's tool or prompt is published under, if it is.
    pub fn public(&self, server: usize, name: &str) -> Option<&str> {
        self.published
            .get(&(server, name.to_owned()))
            .map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.routes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn every_name_is_prefixed_even_with_one_server() {
        let servers = names(&["github"]);
        let (table, refused) = NameTable::build(
            &servers,
            &[names(&["create_issue", "search"])],
            DEFAULT_SEPARATOR,
            &Aliases::new(),
        );
        assert!(refused.is_empty());
        assert_eq!(
            table.route("github__create_issue"),
            Some((0, "create_issue"))
        );
        assert_eq!(table.public(0, "search"), Some("github__search"));
        assert_eq!(table.route("create_issue"), None);
        assert_eq!(table.len(), 2);
    }

    #[test]
    fn routing_is_by_the_table_not_by_splitting() {
        // A tool whose own name holds the separator routes to its server, whole.
        let servers = names(&["a", "b"]);
        let (table, refused) = NameTable::build(
            &servers,
            &[names(&["x__y"]), names(&["x"])],
            DEFAULT_SEPARATOR,
            &Aliases::new(),
        );
        assert!(refused.is_empty());
        assert_eq!(table.route("a__x__y"), Some((0, "x__y")));
        assert_eq!(table.route("b__x"), Some((1, "x")));
    }

    #[test]
    fn a_collision_refuses_both_and_names_them() {
        // "a_" + "__" + "b" and "a" + "__" + "_b" are both "a___b".
        let servers = names(&["a_", "a"]);
        let (table, refused) = NameTable::build(
            &servers,
            &[names(&["b", "ok"]), names(&["_b"])],
            DEFAULT_SEPARATOR,
            &Aliases::new(),
        );
        assert_eq!(table.route("a___b"), None);
        assert_eq!(table.route("a___ok"), Some((0, "ok")));
        assert_eq!(refused.len(), 2);
        assert!(
            refused[0].why.contains("\"_b\" of server \"a\""),
            "{:?}",
            refused[0]
        );
        assert!(
            refused[1].why.contains("\"b\" of server \"a_\""),
            "{:?}",
            refused[1]
        );
        assert!(refused.iter().all(|r| r.why.contains("aliases")));
    }

    #[test]
    fn an_alias_resolves_a_collision_and_a_long_name() {
        let servers = names(&["a_", "a"]);
        let long = "t".repeat(70);
        let mut aliases = Aliases::new();
        aliases.insert(("a".into(), "_b".into()), "a_b_renamed".into());
        aliases.insert(("a_".into(), long.clone()), "short".into());
        let (table, refused) = NameTable::build(
            &servers,
            &[names(&["b", &long]), names(&["_b"])],
            DEFAULT_SEPARATOR,
            &aliases,
        );
        assert!(refused.is_empty(), "{refused:?}");
        assert_eq!(table.route("a___b"), Some((0, "b")));
        assert_eq!(table.route("a_b_renamed"), Some((1, "_b")));
        assert_eq!(table.route("short"), Some((0, long.as_str())));
    }

    #[test]
    fn names_hosts_refuse_are_not_published() {
        let servers = names(&["s"]);
        let long = "t".repeat(62);
        let (table, refused) = NameTable::build(
            &servers,
            &[names(&["has space", "dotted.name", &long, "fine"])],
            DEFAULT_SEPARATOR,
            &Aliases::new(),
        );
        assert_eq!(table.len(), 1);
        assert_eq!(refused.len(), 3);
        assert!(refused[0].why.contains("\"s__has space\""));
        // An alias that breaks the rule is refused the same way.
        let mut aliases = Aliases::new();
        aliases.insert(("s".into(), "fine".into()), "not fine".into());
        let (_, refused) =
            NameTable::build(&servers, &[names(&["fine"])], DEFAULT_SEPARATOR, &aliases);
        assert_eq!(refused.len(), 1);
    }

    #[test]
    fn a_name_listed_twice_is_one_tool() {
        let servers = names(&["s"]);
        let (table, refused) = NameTable::build(
            &servers,
            &[names(&["x", "x"])],
            DEFAULT_SEPARATOR,
            &Aliases::new(),
        );
        assert!(refused.is_empty());
        assert_eq!(table.len(), 1);
    }

    #[test]
    fn separators_and_server_names_are_checked_at_load() {
        assert!(check_separator("__").is_ok());
        assert!(check_separator("-").is_ok());
        for bad in ["", ":", ".", "_____", "a"] {
            let why = check_separator(bad).unwrap_err();
            assert!(why.contains("1 to 4 of '_' and '-'"), "{why}");
        }
        assert!(check_server_names(&names(&["github", "mem-ory"]), "__").is_ok());
        let why = check_server_names(&names(&["my__server"]), "__").unwrap_err();
        assert!(
            why.contains("\"my__server\"") && why.contains("rename"),
            "{why}"
        );
        let why = check_server_names(&["s".repeat(62)], "__").unwrap_err();
        assert!(why.contains("shorter"), "{why}");
        assert!(fits_host_rule(&"a".repeat(64)) && !fits_host_rule(&"a".repeat(65)));
        assert!(!fits_host_rule("") && !fits_host_rule("a:b"));
    }
}
