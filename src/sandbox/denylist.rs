//! Files that may hold credentials, by glob over the resolved relative path: never served,
//! whatever path was used to reach them. `--deny` adds patterns, `--allow` exempts them.

use globset::{Glob, GlobSet, GlobSetBuilder};

/// The built-in patterns (matched case-insensitively, anywhere in the tree).
pub const DEFAULT: &[&str] = &[
    "**/.env",
    "**/.env.*",
    "**/*.pem",
    "**/*.key",
    "**/*.p12",
    "**/*.pfx",
    "**/*.keystore",
    "**/id_rsa*",
    "**/id_dsa*",
    "**/id_ecdsa*",
    "**/id_ed25519*",
    "**/.ssh",
    "**/.ssh/**",
    "**/.aws",
    "**/.aws/**",
    "**/.gnupg",
    "**/.gnupg/**",
    "**/.netrc",
    "**/.git-credentials",
    "**/.npmrc",
    "**/.pypirc",
    "**/.docker/config.json",
    "**/.kube/config",
    "**/credentials.json",
    "**/*.tfstate",
    "**/.htpasswd",
    "**/secrets.y*ml",
];

#[derive(Debug, Clone)]
pub struct Denylist {
    patterns: Vec<String>,
    deny: GlobSet,
    allow: GlobSet,
}

impl Denylist {
    pub fn new(extra: &[String], allow: &[String]) -> Result<Self, String> {
        let patterns: Vec<String> = DEFAULT
            .iter()
            .map(|p| (*p).to_owned())
            .chain(extra.iter().cloned())
            .collect();
        Ok(Denylist {
            deny: build(&patterns, "--deny")?,
            allow: build(allow, "--allow")?,
            patterns,
        })
    }

    /// The rule `path` (relative, resolved) falls under, unless it is allowed.
    pub fn matches(&self, path: &str) -> Option<String> {
        let candidate = if path.is_empty() { "." } else { path };
        if self.allow.is_match(candidate) {
            return None;
        }
        let hits = self.deny.matches(candidate);
        hits.first().map(|i| self.patterns[*i].clone())
    }

    /// The deny patterns, for `git` pathspecs that keep these files out of its output.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

fn build(patterns: &[String], flag: &str) -> Result<GlobSet, String> {
    let mut builder = GlobSetBuilder::new();
    for pattern in patterns {
        let glob = globset::GlobBuilder::new(pattern)
            .case_insensitive(true)
            .literal_separator(true)
            .build()
            .map_err(|e| format!("{flag} '{pattern}' is not a valid glob ({e})"))?;
        builder.add(glob);
    }
    let _ = Glob::new("*");
    builder.build().map_err(|e| format!("{flag}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_denied_anywhere_and_allow_exempts() {
        let list = Denylist::new(&["private/**".into()], &["**/.env.example".into()]).unwrap();
        for denied in [
            ".env",
            "app/.env.local",
            "certs/server.pem",
            ".ssh/id_rsa",
            "home/.aws/credentials",
            "id_ed25519.pub",
            "x/.git-credentials",
            "private/notes.txt",
            "APP/.ENV",
        ] {
            assert!(list.matches(denied).is_some(), "{denied}");
        }
        for allowed in [
            "src/main.rs",
            ".env.example",
            "README.md",
            "keys.rs",
            "environment.md",
        ] {
            assert!(list.matches(allowed).is_none(), "{allowed}");
        }
    }
}
