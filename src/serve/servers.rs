//! `serve --config FILE`: the file's servers on one listener, each a gateway of its own at
//! `/NAME/mcp` (its metadata at `/.well-known/oauth-protected-resource/NAME/mcp`). SIGHUP
//! reloads the file: added servers start, removed ones drain and stop, changed ones get a
//! new gateway for new sessions while the old one finishes its own, and the aggregate
//! endpoints follow (`aggregates.rs`); a file that does not parse changes nothing. The
//! routes are in `servers_routes.rs`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::aggregates;
use super::aggregator::Members;
use super::config::ServeConfig;
use super::config_aggregates;
use super::config_apply;
use super::config_file::{self, Entry};
use super::gateway::Gateway;
use super::running::Running;
use super::session::Session;
use super::sessions::Refused;
use crate::authserver::AuthServer;

pub(super) const PRM_PREFIX: &str = "/.well-known/oauth-protected-resource";

/// One name of the file: the gateway new requests get, and older ones (from before a
/// reload changed or removed it) still finishing their sessions.
pub(super) struct Named {
    /// `None` once a reload removed the server.
    pub(super) entry: Option<Entry>,
    pub(super) current: Option<Arc<Gateway>>,
    pub(super) retiring: Vec<Arc<Gateway>>,
}

pub struct Servers {
    /// The command line's settings, under every server's own.
    pub(super) base: ServeConfig,
    pub(super) file: PathBuf,
    /// `http://host:port` of the listener, for the log.
    pub(super) origin: String,
    pub(super) table: Arc<RwLock<BTreeMap<String, Named>>>,
    /// The running gateways of the current entries (their tasks are stopped at the end).
    pub(super) running: Mutex<BTreeMap<String, Running>>,
    /// Gateways draining after a reload; each task ends its gateway when done.
    pub(super) retirements: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    pub(super) closing: CancellationToken,
    pub(super) reloads_applied: AtomicU64,
    pub(super) reloads_refused: AtomicU64,
    /// `--reload-grace`: how long a changed or removed server's sessions may go on.
    pub(super) reload_grace: Duration,
    /// The aggregate endpoints (`--aggregate`, `[aggregates.NAME]`); `None` until the
    /// servers they reach have started.
    pub(super) aggregates: Option<aggregates::Aggregates>,
    /// Held by the reload in progress.
    pub(super) reloading: tokio::sync::Mutex<()>,
    /// `--enable-oauth`: one authorization server for every endpoint of the listener
    /// (servers with an `auth` of their own excepted), and its housekeeping.
    pub(super) authorization: Option<(Arc<AuthServer>, CancellationToken)>,
}

/// How an aggregate endpoint reaches the file's servers: through each one's current
/// gateway, so a reload's new generation serves its new sessions.
struct TableMembers(Arc<RwLock<BTreeMap<String, Named>>>);

impl Members for TableMembers {
    fn open(
        &self,
        server: &str,
        principal: Option<String>,
        pooled: bool,
    ) -> Result<Arc<Session>, String> {
        let gateway = self
            .0
            .read()
            .expect("table lock")
            .get(server)
            .and_then(|named| named.current.clone())
            .ok_or_else(|| "it was removed from the config file".to_owned())?;
        if gateway.closing.is_cancelled() {
            return Err("the gateway is shutting down".into());
        }
        gateway
            .open_session(principal, pooled)
            .map_err(|refused| match refused {
                Refused::Full(max) => format!("it holds its most sessions ({max}, max_sessions)"),
                Refused::PrincipalFull(max) => {
                    format!("you hold its most sessions per principal ({max})")
                }
                Refused::Spawn(why) => why,
            })
    }
}

impl Servers {
    /// Reads the file and starts every server in it.
    pub async fn start(base: ServeConfig, file: PathBuf, origin: String) -> Result<Self, String> {
        let loaded = config_file::load(&file, &|name| std::env::var(name).ok())?;
        // One policy for the listener, even an empty one: a reload may bring rules.
        let mut base = base;
        let rules = base
            .policy
            .rules(loaded.policy)
            .map_err(|e| format!("--config {}: {e}", file.display()))?;
        let policing = super::policing::Policing::new(rules, base.policy.limits)
            .map_err(|e| format!("--config {}: {e}", file.display()))?;
        base.policing = Some(Arc::new(policing));
        base.auditor = base
            .audit
            .clone()
            .map(crate::audit::Auditor::start)
            .transpose()?;
        let entries = loaded.entries;
        let named: Vec<config_aggregates::Server<'_>> = entries
            .iter()
            .map(|e| (e.name.as_str(), &e.aliases, e.checks_callers_itself()))
            .collect();
        let specs =
            config_aggregates::specs(&loaded.aggregates, &named, &base.aggregate, &base.path)
                .map_err(|e| format!("--config {}: {e}", file.display()))?;
        let authorization = match base.auth_server.clone() {
            Some(settings) => {
                let server = super::running::open_authorization_server(settings).await?;
                Some((server.clone(), super::running::keep_house(server)))
            }
            None => None,
        };
        let mut servers = Servers {
            authorization,
            reloading: tokio::sync::Mutex::new(()),
            reload_grace: base.reload_grace,
            base,
            file,
            origin,
            table: Arc::new(RwLock::new(BTreeMap::new())),
            running: Mutex::new(BTreeMap::new()),
            retirements: Mutex::new(Vec::new()),
            closing: CancellationToken::new(),
            reloads_applied: AtomicU64::new(0),
            reloads_refused: AtomicU64::new(0),
            aggregates: None,
        };
        for entry in entries {
            servers.add(entry).await?;
        }
        let making = aggregates::Making {
            base: servers.base.clone(),
            members: Arc::new(TableMembers(servers.table.clone())),
            origin: servers.origin.clone(),
            authorization: servers.authorization.as_ref().map(|(s, _)| s.clone()),
        };
        servers.aggregates = Some(aggregates::Aggregates::start(specs, making).await?);
        servers.authorization_covers_the_file();
        Ok(servers)
    }

    /// The command line's settings every server starts from.
    pub fn base(&self) -> &ServeConfig {
        &self.base
    }

    pub fn shutdown_grace(&self) -> Duration {
        self.base.shutdown_grace
    }

    async fn add(&self, entry: Entry) -> Result<(), String> {
        let name = entry.name.clone();
        let config = config_apply::apply(&entry, &self.base);
        tracing::info!(
            "serving `{}` at {}{}",
            super::config_remote::shown(&config.command.argv),
            self.origin,
            config.path
        );
        let shared = self.authorization.as_ref().map(|(s, _)| s.clone());
        let running = Running::start_sharing(config, shared).await?;
        let gateway = running.gateway.clone();
        let retired = self
            .running
            .lock()
            .expect("running lock")
            .insert(name.clone(), running);
        let mut table = self.table.write().expect("table lock");
        let named = table.entry(name.clone()).or_insert(Named {
            entry: None,
            current: None,
            retiring: Vec::new(),
        });
        named.entry = Some(entry);
        if let Some(old) = named.current.replace(gateway) {
            named.retiring.push(old);
        }
        drop(table);
        if let Some(old) = retired {
            self.retire(name, old);
        }
        self.authorization_covers_the_file();
        Ok(())
    }

    /// Tells the listener's authorization server which endpoints it issues tokens for:
    /// every current server without an `auth` of its own, and every aggregate endpoint.
    fn authorization_covers_the_file(&self) {
        let Some((server, _)) = &self.authorization else {
            return;
        };
        let mut paths: Vec<String> = self
            .table
            .read()
            .expect("table lock")
            .iter()
            .filter(|(_, named)| named.entry.as_ref().is_some_and(|e| e.auth.is_none()))
            .map(|(name, _)| format!("/{name}/mcp"))
            .collect();
        paths.extend(self.aggregates.iter().flat_map(|a| a.paths()));
        server.serve_paths(paths);
    }

    fn remove(&self, name: &str) {
        let mut table = self.table.write().expect("table lock");
        if let Some(named) = table.get_mut(name) {
            named.entry = None;
            if let Some(old) = named.current.take() {
                named.retiring.push(old);
            }
        }
        drop(table);
        if let Some(old) = self.running.lock().expect("running lock").remove(name) {
            self.retire(name.to_owned(), old);
        }
        self.authorization_covers_the_file();
    }

    /// Lets an old gateway finish: no new sessions, its open ones go on until they end or
    /// `--reload-grace` is up, then it and its children stop.
    fn retire(&self, name: String, running: Running) {
        let gateway = running.gateway.clone();
        gateway.draining.cancel();
        let grace = self.reload_grace;
        let closing = self.closing.clone();
        let table = self.table.clone();
        let task = tokio::spawn(async move {
            if !super::running::drained(&gateway, grace, &closing).await {
                tracing::info!(server = %name, sessions = gateway.sessions.count_unpooled(), "--reload-grace is up; ending the old server's sessions");
            }
            {
                let mut table = table.write().expect("table lock");
                if let Some(named) = table.get_mut(&name) {
                    named.retiring.retain(|g| !Arc::ptr_eq(g, &gateway));
                    if named.entry.is_none() && named.retiring.is_empty() {
                        table.remove(&name);
                    }
                }
            }
            running.stop().await;
            tracing::info!(server = %name, "an old server generation stopped");
        });
        let mut retirements = self.retirements.lock().expect("retirements lock");
        retirements.retain(|task| !task.is_finished());
        retirements.push(task);
    }

    /// SIGHUP: reads the file again and applies the difference; a file that does not
    /// parse (or names a program that cannot be found) changes nothing.
    pub async fn reload(&self) {
        // One reload at a time (each runs in a task of its own, off the accept loop).
        let _one_at_a_time = self.reloading.lock().await;
        let loaded =
            config_file::load(&self.file, &|name| std::env::var(name).ok()).and_then(|loaded| {
                let named: Vec<config_aggregates::Server<'_>> = loaded
                    .entries
                    .iter()
                    .map(|e| (e.name.as_str(), &e.aliases, e.checks_callers_itself()))
                    .collect();
                let specs = config_aggregates::specs(
                    &loaded.aggregates,
                    &named,
                    &self.base.aggregate,
                    &self.base.path,
                )?;
                // A policy that does not load refuses the whole reload.
                let policy = match &self.base.policing {
                    Some(policing) => Some(policing.check(self.base.policy.rules(loaded.policy)?)?),
                    None => None,
                };
                Ok((loaded.entries, specs, policy))
            });
        let (entries, specs, policy) = match loaded {
            Ok(loaded) => loaded,
            Err(e) => {
                self.reloads_refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("SIGHUP: not reloaded, every server goes on as it was: {e}");
                return;
            }
        };
        if let (Some(policing), Some(policy)) = (&self.base.policing, policy) {
            tracing::info!(rules = policy.len(), "SIGHUP: the policy reloaded");
            policing.replace(policy);
        }
        let before: BTreeMap<String, Entry> = self
            .table
            .read()
            .expect("table lock")
            .iter()
            .filter_map(|(name, named)| named.entry.clone().map(|e| (name.clone(), e)))
            .collect();
        let (mut added, mut changed, mut kept) = (Vec::new(), Vec::new(), Vec::new());
        for entry in &entries {
            match before.get(&entry.name) {
                None => added.push(entry.name.clone()),
                Some(old) if old == entry => kept.push(entry.name.clone()),
                Some(_) => changed.push(entry.name.clone()),
            }
        }
        let removed: Vec<String> = before
            .keys()
            .filter(|name| !entries.iter().any(|e| &e.name == *name))
            .cloned()
            .collect();
        let replaced: Vec<String> = changed.iter().chain(&removed).cloned().collect();
        if let Some(aggregates) = &self.aggregates {
            aggregates.servers_replacing(&replaced);
        }
        for entry in entries {
            let differs = added.contains(&entry.name) || changed.contains(&entry.name);
            if differs && let Err(e) = self.add(entry).await {
                tracing::error!("SIGHUP: {e}");
            }
        }
        for name in &removed {
            self.remove(name);
        }
        if let Some(aggregates) = &self.aggregates {
            aggregates.servers_replaced(&replaced).await;
            aggregates
                .apply(specs, self.reload_grace, &self.closing)
                .await;
            self.authorization_covers_the_file();
        }
        self.reloads_applied.fetch_add(1, Ordering::Relaxed);
        tracing::info!(
            added = %added.join(","),
            changed = %changed.join(","),
            removed = %removed.join(","),
            unchanged = %kept.join(","),
            "SIGHUP: reloaded {}",
            self.file.display()
        );
    }

    /// Shutdown begins: every gateway's streams end.
    pub fn closing(&self) {
        self.closing.cancel();
        for named in self.table.read().expect("table lock").values() {
            for gateway in named.current.iter().chain(&named.retiring) {
                gateway.closing.cancel();
            }
        }
        if let Some(aggregates) = &self.aggregates {
            aggregates.closing();
        }
    }

    /// Ends every server, the draining ones included.
    pub async fn stop_all(&self) {
        self.closing();
        if let Some(aggregates) = &self.aggregates {
            aggregates.stop_all().await;
        }
        if let Some((_, housekeeping)) = &self.authorization {
            housekeeping.cancel();
        }
        let running: Vec<Running> =
            std::mem::take(&mut *self.running.lock().expect("running lock"))
                .into_values()
                .collect();
        for running in running {
            running.stop().await;
        }
        let retirements = std::mem::take(&mut *self.retirements.lock().expect("retirements lock"));
        for task in retirements {
            let _ = task.await;
        }
    }
}
