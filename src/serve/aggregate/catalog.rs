//! What the aggregate endpoint lists: each backend's tools, prompts, resources and resource
//! templates as last read (every page of them), merged on demand into the published lists
//! with the tables that route names back. Every change (a list read again, a backend left
//! out or back) starts a new generation, so a cursor into an older list is refused rather
//! than answered from a list it was not made for. Pure: the caller reads the backends.

use serde_json::Value;

use super::cursor::{self, CursorError};
use super::lists::{publish_named, publish_resources};
use super::names::{Aliases, NameTable, Refused, check_separator, check_server_names};
use super::route::{List, Tables};
use super::uris::UriPrefixes;

const LISTS: [List; 4] = [
    List::Tools,
    List::Prompts,
    List::Resources,
    List::ResourceTemplates,
];

impl List {
    /// The key of a list result that holds its items.
    pub fn key(self) -> &'static str {
        match self {
            List::Tools => "tools",
            List::Prompts => "prompts",
            List::Resources => "resources",
            List::ResourceTemplates => "resourceTemplates",
        }
    }

    /// The method that reads it.
    pub fn method(self) -> &'static str {
        match self {
            List::Tools => "tools/list",
            List::Prompts => "prompts/list",
            List::Resources => "resources/list",
            List::ResourceTemplates => "resources/templates/list",
        }
    }

    fn index(self) -> usize {
        match self {
            List::Tools => 0,
            List::Prompts => 1,
            List::Resources => 2,
            List::ResourceTemplates => 3,
        }
    }
}

/// One list's merge, kept until something changes.
#[derive(Debug, Default)]
struct Merged {
    items: Vec<Value>,
    /// For tools and prompts: published name → backend and name.
    table: NameTable,
    refused: Vec<Refused>,
}

#[derive(Debug)]
pub struct Catalog {
    servers: Vec<String>,
    separator: String,
    aliases: Aliases,
    uris: UriPrefixes,
    /// The most items one merged list may hold (`--aggregate-max-list-items`).
    max_items: usize,
    generation: u64,
    /// `read[list][server]`: the backend's items, `None` until read (or after a change).
    read: [Vec<Option<Vec<Value>>>; 4],
    /// Backends left out of every list (failed, or not answering).
    down: Vec<bool>,
    merged: [Option<Merged>; 4],
}

impl Catalog {
    /// Checks the servers' names and the separator at load.
    pub fn new(
        servers: Vec<String>,
        separator: &str,
        aliases: Aliases,
        max_items: usize,
    ) -> Result<Catalog, String> {
        check_separator(separator)?;
        check_server_names(&servers, separator)?;
        let uris = UriPrefixes::new(&servers)?;
        let unread = vec![None; servers.len()];
        Ok(Catalog {
            down: vec![false; servers.len()],
            read: [unread.clone(), unread.clone(), unread.clone(), unread],
            servers,
            separator: separator.to_owned(),
            aliases,
            uris,
            max_items: max_items.max(1),
            generation: 1,
            merged: Default::default(),
        })
    }

    pub fn servers(&self) -> &[String] {
        &self.servers
    }

    pub fn uris(&self) -> &UriPrefixes {
        &self.uris
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The backends whose `list` must be read before it can be answered (not read yet, or
    /// changed since), leaving out those that are down.
    pub fn unread(&self, list: List) -> Vec<usize> {
        (0..self.servers.len())
            .filter(|&server| !self.down[server] && self.read[list.index()][server].is_none())
            .collect()
    }

    /// Records a backend's whole list (the items of every page, in order). Refused when
    /// the merged list would hold more than the bound; this read is not kept then.
    pub fn record(&mut self, list: List, server: usize, items: Vec<Value>) -> Result<(), String> {
        let others: usize = self.read[list.index()]
            .iter()
            .enumerate()
            .filter(|(other, _)| *other != server && !self.down[*other])
            .filter_map(|(_, items)| items.as_ref().map(Vec::len))
            .sum();
        if others + items.len() > self.max_items {
            return Err(format!(
                "{} of this endpoint's servers together come to more than {} (--aggregate-max-list-items); {:?} alone lists {}: raise the bound, or publish fewer servers at this endpoint",
                list.key(),
                self.max_items,
                self.servers[server],
                items.len()
            ));
        }
        self.read[list.index()][server] = Some(items);
        self.changed(list);
        Ok(())
    }

    /// A backend's `list_changed`: its list is read again before the next answer.
    pub fn forget(&mut self, list: List, server: usize) {
        if self.read[list.index()][server].take().is_some() {
            self.changed(list);
        }
    }

    /// Leaves a backend out of every list (`true`) or takes it back (`false`, its lists
    /// read again first).
    pub fn set_down(&mut self, server: usize, down: bool) {
        if self.down[server] == down {
            return;
        }
        self.down[server] = down;
        for list in LISTS {
            self.read[list.index()][server] = None;
            self.changed(list);
        }
    }

    pub fn is_down(&self, server: usize) -> bool {
        self.down[server]
    }

    fn changed(&mut self, list: List) {
        self.merged[list.index()] = None;
        self.generation += 1;
    }

    fn merged(&mut self, list: List) -> &Merged {
        let slot = list.index();
        if self.merged[slot].is_none() {
            let lists: Vec<Vec<Value>> = (0..self.servers.len())
                .map(|server| match &self.read[slot][server] {
                    Some(items) if !self.down[server] => items.clone(),
                    _ => Vec::new(),
                })
                .collect();
            let merged = match list {
                List::Tools | List::Prompts => {
                    let (items, table, refused) =
                        publish_named(&self.servers, &lists, &self.separator, &self.aliases);
                    for refusal in &refused {
                        tracing::warn!(server = %refusal.server, name = %refusal.name, list = list.key(), "not published at the aggregate endpoint: {}", refusal.why);
                    }
                    Merged {
                        items,
                        table,
                        refused,
                    }
                }
                List::Resources => Merged {
                    items: publish_resources(&self.uris, &lists, "uri"),
                    ..Merged::default()
                },
                List::ResourceTemplates => Merged {
                    items: publish_resources(&self.uris, &lists, "uriTemplate"),
                    ..Merged::default()
                },
            };
            self.merged[slot] = Some(merged);
        }
        self.merged[slot].as_ref().expect("merged just now")
    }

    /// One page of the merged list for a client's cursor, and the cursor of the next.
    pub fn page(
        &mut self,
        list: List,
        cursor: Option<&str>,
        page_size: usize,
    ) -> Result<(Vec<Value>, Option<String>), CursorError> {
        let generation = self.generation;
        let merged = self.merged(list);
        let (page, next) = cursor::page(&merged.items, generation, cursor, page_size)?;
        Ok((page.to_vec(), next))
    }

    /// The routing table of tools or prompts, merged if need be.
    pub fn names(&mut self, list: List) -> &NameTable {
        &self.merged(list).table
    }

    /// The tables requests are routed by (tools and prompts merged if need be).
    pub fn tables(&mut self) -> Tables<'_> {
        self.merged(List::Tools);
        self.merged(List::Prompts);
        let table = |list: List| {
            &self.merged[list.index()]
                .as_ref()
                .expect("merged just now")
                .table
        };
        Tables {
            tools: table(List::Tools),
            prompts: table(List::Prompts),
            uris: &self.uris,
        }
    }

    /// What could not be published in `list`, and why.
    pub fn refused(&mut self, list: List) -> &[Refused] {
        &self.merged(list).refused
    }
}

/// The items of a backend's list pages (`key` of each page's result), in order.
pub fn items_of(list: List, pages: &[Value]) -> Vec<Value> {
    pages
        .iter()
        .filter_map(|page| page.get(list.key()).and_then(Value::as_array))
        .flatten()
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn catalog(max_items: usize) -> Catalog {
        Catalog::new(
            vec!["a".into(), "b".into()],
            "__",
            Aliases::new(),
            max_items,
        )
        .unwrap()
    }

    fn tools(names: &[&str]) -> Vec<Value> {
        names.iter().map(|n| json!({"name": n})).collect()
    }

    fn names(page: &[Value]) -> Vec<&str> {
        page.iter().map(|t| t["name"].as_str().unwrap()).collect()
    }

    #[test]
    fn every_backends_pages_make_one_list() {
        let mut catalog = catalog(100);
        assert_eq!(catalog.unread(List::Tools), [0, 1]);
        let pages = [
            json!({"tools": [{"name": "x"}], "nextCursor": "2"}),
            json!({"tools": [{"name": "y"}]}),
        ];
        catalog
            .record(List::Tools, 0, items_of(List::Tools, &pages))
            .unwrap();
        catalog.record(List::Tools, 1, tools(&["x"])).unwrap();
        assert!(catalog.unread(List::Tools).is_empty());
        let (page, next) = catalog.page(List::Tools, None, 100).unwrap();
        assert_eq!(names(&page), ["a__x", "a__y", "b__x"]);
        assert!(next.is_none());
        assert_eq!(catalog.names(List::Tools).route("b__x"), Some((1, "x")));
    }

    #[test]
    fn a_change_starts_a_new_generation_and_stale_cursors_are_refused() {
        let mut catalog = catalog(100);
        catalog
            .record(List::Tools, 0, tools(&["p", "q", "r"]))
            .unwrap();
        catalog.record(List::Tools, 1, tools(&[])).unwrap();
        let (first, next) = catalog.page(List::Tools, None, 2).unwrap();
        assert_eq!(names(&first), ["a__p", "a__q"]);
        let next = next.unwrap();
        catalog.forget(List::Tools, 1);
        assert_eq!(catalog.unread(List::Tools), [1]);
        assert_eq!(
            catalog.page(List::Tools, Some(&next), 2),
            Err(CursorError::Stale)
        );
        catalog.record(List::Tools, 1, tools(&["s"])).unwrap();
        let (all, _) = catalog.page(List::Tools, None, 10).unwrap();
        assert_eq!(names(&all), ["a__p", "a__q", "a__r", "b__s"]);
    }

    #[test]
    fn a_backend_that_is_down_leaves_every_list_and_comes_back_read_again() {
        let mut catalog = catalog(100);
        catalog.record(List::Tools, 0, tools(&["p"])).unwrap();
        catalog.record(List::Tools, 1, tools(&["q"])).unwrap();
        catalog.set_down(1, true);
        assert!(catalog.unread(List::Tools).is_empty());
        let (page, _) = catalog.page(List::Tools, None, 10).unwrap();
        assert_eq!(names(&page), ["a__p"]);
        assert_eq!(catalog.names(List::Tools).route("b__q"), None);
        catalog.set_down(1, false);
        assert_eq!(catalog.unread(List::Tools), [1]);
    }

    #[test]
    fn a_list_over_the_bound_is_refused_and_not_kept() {
        let mut catalog = catalog(3);
        catalog.record(List::Tools, 0, tools(&["p", "q"])).unwrap();
        let why = catalog
            .record(List::Tools, 1, tools(&["r", "s"]))
            .unwrap_err();
        assert!(
            why.contains("--aggregate-max-list-items") && why.contains("\"b\""),
            "{why}"
        );
        assert_eq!(catalog.unread(List::Tools), [1]);
        // The same backend's list read again replaces its old one rather than adding to it.
        catalog
            .record(List::Tools, 0, tools(&["p", "q", "r"]))
            .unwrap();
    }

    #[test]
    fn resources_and_templates_are_published_under_their_prefixes() {
        let mut catalog = catalog(100);
        catalog
            .record(List::Resources, 1, vec![json!({"uri": "memory://graph"})])
            .unwrap();
        catalog
            .record(
                List::ResourceTemplates,
                0,
                vec![json!({"uriTemplate": "t://{x}"})],
            )
            .unwrap();
        let (page, _) = catalog.page(List::Resources, None, 10).unwrap();
        assert_eq!(page[0]["uri"], "b+memory://graph");
        let (page, _) = catalog.page(List::ResourceTemplates, None, 10).unwrap();
        assert_eq!(page[0]["uriTemplate"], "a+t://{x}");
        assert_eq!(List::ResourceTemplates.method(), "resources/templates/list");
    }

    #[test]
    fn bad_names_are_refused_at_load() {
        assert!(Catalog::new(vec!["a__b".into()], "__", Aliases::new(), 10).is_err());
        assert!(Catalog::new(vec!["a".into()], ":", Aliases::new(), 10).is_err());
        assert!(
            Catalog::new(
                vec!["Files".into(), "files".into()],
                "__",
                Aliases::new(),
                10
            )
            .is_err()
        );
    }
}
