//! Resource URIs at the aggregate endpoint: a backend's `scheme:rest` is published as
//! `PREFIX+scheme:rest`, and a client's URI is traced back to its server by that prefix.
//! The prefix is the server's name made fit for a URI scheme (lowercase, `_` as `.`),
//! because clients parse resource URIs (the Python SDK as pydantic URLs, which lowercase
//! the scheme and refuse `_` in it): a prefix a client would rewrite could not be traced
//! back.

/// Each server's URI prefix, by the server's index.
#[derive(Debug, Clone)]
pub struct UriPrefixes {
    prefixes: Vec<String>,
}

impl UriPrefixes {
    /// Checks at load that every server has a prefix of its own that starts a URI scheme.
    pub fn new(servers: &[String]) -> Result<Self, String> {
        let mut prefixes: Vec<String> = Vec::with_capacity(servers.len());
        for (index, server) in servers.iter().enumerate() {
            let prefix: String = server
                .chars()
                .map(|c| match c {
                    '_' => '.',
                    c => c.to_ascii_lowercase(),
                })
                .collect();
            let fits = prefix.starts_with(|c: char| c.is_ascii_lowercase())
                && prefix
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
            if !fits {
                return Err(format!(
                    "server {server:?}: its resources would be published under the URI prefix {prefix:?}, and a URI scheme must start with a letter: give the server a name that starts with one"
                ));
            }
            if let Some(other) = prefixes.iter().position(|p| *p == prefix) {
                return Err(format!(
                    "servers {:?} and {server:?} would publish their resources under the same URI prefix {prefix:?} (URI schemes ignore case, and '_' is written '.'): rename one of them",
                    servers[other]
                ));
            }
            debug_assert_eq!(prefixes.len(), index);
            prefixes.push(prefix);
        }
        Ok(UriPrefixes { prefixes })
    }

    /// The URI clients see for `server`'s `uri` (or URI template).
    pub fn publish(&self, server: usize, uri: &str) -> String {
        let prefix = &self.prefixes[server];
        let mut published = String::with_capacity(prefix.len() + 1 + uri.len());
        published.push_str(prefix);
        published.push('+');
        published.push_str(uri);
        published
    }

    /// The server and its own URI behind a published one; `None` for a URI no server of
    /// this endpoint published. Server names hold no `+`, so the first `+` ends the
    /// prefix, whatever the backend's own scheme holds (`git+ssh:`).
    pub fn restore<'a>(&self, published: &'a str) -> Option<(usize, &'a str)> {
        let (prefix, uri) = published.split_once('+')?;
        if uri.is_empty() {
            return None;
        }
        let server = self
            .prefixes
            .iter()
            .position(|p| p.eq_ignore_ascii_case(prefix))?;
        Some((server, uri))
    }

    pub fn prefix(&self, server: usize) -> &str {
        &self.prefixes[server]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_uri_round_trips_through_its_prefix() {
        let prefixes = UriPrefixes::new(&servers(&["memory", "My_Files", "git2"])).unwrap();
        for (server, uri) in [
            (0, "memory://graph"),
            (1, "file:///home/a%20b/c.txt"),
            (2, "git+ssh://host/repo?x=1#y"),
            (1, "file:///{path}"),
        ] {
            let published = prefixes.publish(server, uri);
            assert_eq!(
                prefixes.restore(&published),
                Some((server, uri)),
                "{published}"
            );
        }
        assert_eq!(prefixes.publish(1, "file:///x"), "my.files+file:///x");
        // Clients that lowercase the scheme (pydantic's URL) are still traced back.
        assert_eq!(
            prefixes.restore("MY.FILES+file:///x"),
            Some((1, "file:///x"))
        );
    }

    #[test]
    fn published_uris_parse_as_urls_with_the_same_text() {
        // What the Python SDK's client does to a resource URI before sending it back.
        let prefixes = UriPrefixes::new(&servers(&["fs_1"])).unwrap();
        for uri in [
            "file:///tmp/a.txt",
            "test://static/resource/1",
            "memory://x/y",
        ] {
            let published = prefixes.publish(0, uri);
            let parsed = url::Url::parse(&published).unwrap();
            assert_eq!(prefixes.restore(parsed.as_str()), Some((0, uri)));
        }
    }

    #[test]
    fn uris_of_no_server_are_not_traced() {
        let prefixes = UriPrefixes::new(&servers(&["a"])).unwrap();
        for foreign in ["file:///x", "b+file:///x", "a+", "+file:///x", ""] {
            assert_eq!(prefixes.restore(foreign), None, "{foreign}");
        }
    }

    #[test]
    fn names_that_cannot_be_a_prefix_are_refused_at_load() {
        let why = UriPrefixes::new(&servers(&["1password"])).unwrap_err();
        assert!(why.contains("start with a letter"), "{why}");
        let why = UriPrefixes::new(&servers(&["Files", "files"])).unwrap_err();
        assert!(
            why.contains("\"Files\" and \"files\"") && why.contains("rename"),
            "{why}"
        );
        let why = UriPrefixes::new(&servers(&["a_b", "a.b"])).unwrap_err();
        assert!(why.contains("same URI prefix"), "{why}");
    }
}
