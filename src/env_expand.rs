//! `${VAR}` and `${VAR:-default}` in a configured value (relay `-H` headers, serve's
//! `--config` files), as Claude Code expands them in `.mcp.json`: one rule for both. A
//! name is letters, digits and `_`; an unset variable without a default is an error,
//! since sending an empty credential silently is worse than refusing to start.

/// `value` with every `${…}` replaced from `env`.
pub fn expand(value: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or("'${' without a closing '}'; write ${NAME} or ${NAME:-default}")?;
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!(
                "'${{{name}}}' is not a variable name (letters, digits and _ only)"
            ));
        }
        match (env(name), default) {
            (Some(found), _) => out.push_str(&found),
            (None, Some(default)) => out.push_str(default),
            (None, None) => {
                return Err(format!(
                    "${{{name}}}: the environment variable {name} is not set; set it, or write ${{{name}:-default}}"
                ));
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "TOKEN").then(|| "s3cret".to_owned())
    }

    #[test]
    fn names_defaults_and_mistakes() {
        assert_eq!(expand("key-${TOKEN}!", &env).unwrap(), "key-s3cret!");
        assert_eq!(
            expand("${MISSING:-d}/${TOKEN:-x}", &env).unwrap(),
            "d/s3cret"
        );
        assert_eq!(expand("${MISSING:-}", &env).unwrap(), "");
        assert_eq!(
            expand("no variables $HOME", &env).unwrap(),
            "no variables $HOME"
        );
        assert!(
            expand("${MISSING}", &env)
                .unwrap_err()
                .contains("MISSING is not set")
        );
        assert!(
            expand("${BAD-NAME}", &env)
                .unwrap_err()
                .contains("not a variable name")
        );
        assert!(expand("${}", &env).is_err());
        assert!(
            expand("${TOKEN", &env)
                .unwrap_err()
                .contains("without a closing")
        );
    }
}
