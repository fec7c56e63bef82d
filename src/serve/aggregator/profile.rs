//! One ask profile's view of an aggregate endpoint. Servers may list some tools only to
//! clients that can answer their questions, so clients that can be asked different things
//! get lists of their own: a catalog per profile, read through the endpoint's own session
//! with each server (the scout) declaring exactly that profile's capabilities.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::Value;

use super::settings::{AggregateFlags, AggregateSpec};
use crate::serve::aggregate::catalog::Catalog;
use crate::serve::aggregate::cursor::CursorError;
use crate::serve::aggregate::handshake::AskProfile;
use crate::serve::aggregate::route::{self, List, Target, Unroutable};
use crate::serve::backend::Named;
use crate::serve::session::Session;

/// The endpoint's own session with one server, for one profile.
#[derive(Default)]
pub struct Scout {
    pub session: Option<Arc<Session>>,
    pub handshake: Option<Value>,
    pub failed_at: Option<Instant>,
}

pub struct Profile {
    pub ask: AskProfile,
    catalog: Mutex<Catalog>,
    pub scouts: Vec<tokio::sync::Mutex<Scout>>,
    /// One list read at a time: concurrent first `tools/list`s wait for the same read.
    pub reading: tokio::sync::Mutex<()>,
}

impl Profile {
    /// A profile's empty catalog (the names were checked when the endpoint was made).
    pub fn new(
        ask: AskProfile,
        spec: &AggregateSpec,
        flags: &AggregateFlags,
        down: &[bool],
    ) -> Result<Profile, String> {
        let mut catalog = Catalog::new(
            spec.servers.clone(),
            &spec.separator,
            spec.aliases.clone(),
            flags.max_list_items,
        )?;
        for (server, down) in down.iter().enumerate() {
            catalog.set_down(server, *down);
        }
        Ok(Profile {
            ask,
            catalog: Mutex::new(catalog),
            scouts: spec.servers.iter().map(|_| Default::default()).collect(),
            reading: tokio::sync::Mutex::new(()),
        })
    }

    pub fn unread(&self, list: List) -> Vec<usize> {
        self.catalog.lock().expect("catalog lock").unread(list)
    }

    pub fn record(&self, list: List, server: usize, items: Vec<Value>) -> Result<(), String> {
        self.catalog
            .lock()
            .expect("catalog lock")
            .record(list, server, items)
    }

    pub fn forget(&self, list: List, server: usize) {
        self.catalog
            .lock()
            .expect("catalog lock")
            .forget(list, server);
    }

    pub fn set_down(&self, server: usize, down: bool) {
        self.catalog
            .lock()
            .expect("catalog lock")
            .set_down(server, down);
    }

    /// Ends the scout of `server` (it failed), if nobody is starting it right now.
    pub fn end_scout(&self, server: usize) {
        if let Ok(mut scout) = self.scouts[server].try_lock()
            && let Some(session) = scout.session.take()
        {
            session.end.cancel();
        }
    }

    pub fn stop(&self) {
        for server in 0..self.scouts.len() {
            self.end_scout(server);
        }
    }

    /// One page of a merged list, for a client's cursor.
    pub fn page(
        &self,
        list: List,
        cursor: Option<&str>,
        page_size: usize,
    ) -> Result<(Vec<Value>, Option<String>), CursorError> {
        self.catalog
            .lock()
            .expect("catalog lock")
            .page(list, cursor, page_size)
    }

    /// The member server and its own name for a public tool or prompt name, or a
    /// published URI; `None` while the list that names it is unread, or if nothing is
    /// published under it.
    pub fn owner_of(&self, named: Named, public: &str) -> Option<(usize, String)> {
        let mut catalog = self.catalog.lock().expect("catalog lock");
        let list = match named {
            Named::Tool => List::Tools,
            Named::Prompt => List::Prompts,
            Named::Resource => {
                return catalog
                    .uris()
                    .restore(public)
                    .map(|(server, uri)| (server, uri.to_owned()));
            }
        };
        if !catalog.unread(list).is_empty() {
            return None;
        }
        catalog
            .names(list)
            .route(public)
            .map(|(server, name)| (server, name.to_owned()))
    }

    /// Where a request goes (the lists it needs were read first by the caller).
    pub fn route(
        &self,
        method: &str,
        params: Option<&Value>,
    ) -> Option<Result<Target, Unroutable>> {
        let mut catalog = self.catalog.lock().expect("catalog lock");
        route::route(method, params, &catalog.tables())
    }
}
