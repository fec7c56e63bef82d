//! Paged list results (`tools/list`, `resources/list`, …): one cursor rule and one page
//! loop for every reader (the relay's tool table, serve's annotations, `check`). A page's
//! `nextCursor` continues only when it is a non-empty string; absent, null, empty or
//! anything else means the last page.

use serde_json::{Map, Value};

/// The cursor for the page after `result`, if there is one.
pub fn next_cursor(result: &Value) -> Option<&str> {
    result
        .get("nextCursor")
        .and_then(Value::as_str)
        .filter(|cursor| !cursor.is_empty())
}

/// `params` for the page at `cursor` (the first page has none).
pub fn with_cursor(mut params: Map<String, Value>, cursor: Option<String>) -> Map<String, Value> {
    if let Some(cursor) = cursor {
        params.insert("cursor".into(), Value::String(cursor));
    }
    params
}

/// Where a paged read is: `while let Some(cursor) = pages.next_page()`, read that page,
/// then `pages.after(&result)`. It ends when a page names no next one (`complete`) or
/// after `max_pages`.
#[derive(Debug)]
pub struct Pages {
    max_pages: usize,
    read: usize,
    cursor: Option<String>,
    complete: bool,
}

impl Pages {
    pub fn new(max_pages: usize) -> Self {
        Pages {
            max_pages,
            read: 0,
            cursor: None,
            complete: false,
        }
    }

    /// The cursor of the page to read next (`Some(None)` for the first), or `None` when
    /// the read is over.
    pub fn next_page(&mut self) -> Option<Option<String>> {
        if self.complete || self.read == self.max_pages || (self.read > 0 && self.cursor.is_none())
        {
            return None;
        }
        Some(self.cursor.take())
    }

    /// Records the page just read.
    pub fn after(&mut self, result: &Value) {
        self.read += 1;
        self.cursor = next_cursor(result).map(str::to_owned);
        self.complete = self.cursor.is_none();
    }

    /// Pages read so far.
    pub fn read(&self) -> usize {
        self.read
    }

    /// Whether the last page read said it was the last (not stopped at the bound).
    pub fn complete(&self) -> bool {
        self.complete
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_non_empty_string_continues() {
        assert_eq!(next_cursor(&json!({"nextCursor": "p2"})), Some("p2"));
        for last in [
            json!({}),
            json!({"nextCursor": null}),
            json!({"nextCursor": ""}),
            json!({"nextCursor": 2}),
        ] {
            assert_eq!(next_cursor(&last), None, "{last}");
        }
        let params = with_cursor(Map::new(), Some("p2".into()));
        assert_eq!(params["cursor"], "p2");
        assert!(with_cursor(Map::new(), None).is_empty());
    }

    #[test]
    fn pages_are_read_until_the_last_or_the_bound() {
        let answers = [
            json!({"nextCursor": "b"}),
            json!({"nextCursor": "c"}),
            json!({}),
        ];
        let mut pages = Pages::new(5);
        let mut asked = Vec::new();
        while let Some(cursor) = pages.next_page() {
            asked.push(cursor);
            pages.after(&answers[asked.len() - 1]);
        }
        assert_eq!(asked, [None, Some("b".into()), Some("c".into())]);
        assert!(pages.complete());
        assert_eq!(pages.read(), 3);
        let mut endless = Pages::new(2);
        while endless.next_page().is_some() {
            endless.after(&json!({"nextCursor": "again"}));
        }
        assert_eq!((endless.read(), endless.complete()), (2, false));
        let mut failed = Pages::new(3);
        assert_eq!(failed.next_page(), Some(None));
        // A page that did not come: nothing recorded, not complete.
        assert!(!failed.complete());
    }
}
