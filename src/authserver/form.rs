//! Request parameters of the OAuth endpoints (a query string or a form body), where a
//! parameter given twice is an error (RFC 6749 §3.1).

pub struct Params(Vec<(String, String)>);

impl Params {
    pub fn parse(raw: &[u8]) -> Self {
        Params(
            url::form_urlencoded::parse(raw)
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    /// The parameter's one value (`Ok(None)` when absent or empty; `Err` when repeated).
    pub fn single(&self, name: &str) -> Result<Option<&str>, String> {
        let mut values = self
            .0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str());
        let first = values.next();
        if values.next().is_some() {
            return Err(format!("the {name} parameter is given more than once"));
        }
        Ok(first.filter(|v| !v.is_empty()))
    }
}
