//! Reading an aggregate endpoint's lists for a profile: every list not known yet, from
//! each server that is up (`--aggregate-concurrency` at a time, each within
//! `--aggregate-timeout`), the servers that are down tried again first for a list request.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures_util::StreamExt;
use serde_json::Value;

use super::endpoint::{Endpoint, ServerState};
use super::profile::Profile;
use super::scout;
use crate::serve::aggregate::route::List;

impl Endpoint {
    /// For a call: the servers that are down are tried again in the background (one such
    /// task at a time), so the call does not wait, and a later one finds them back.
    fn revive_meanwhile(self: &Arc<Self>, profile: &Arc<Profile>) {
        let down = self.any_down();
        if !down || self.reviving.swap(true, Ordering::SeqCst) {
            return;
        }
        let (endpoint, profile) = (self.clone(), profile.clone());
        let task: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> =
            Box::pin(async move {
                endpoint.revive(&profile).await;
                endpoint.reviving.store(false, Ordering::SeqCst);
            });
        tokio::spawn(task);
    }

    /// Reads every list in `lists` that `profile` does not know yet from each server that
    /// is up.
    pub async fn read_lists(
        self: &Arc<Self>,
        profile: &Arc<Profile>,
        lists: &[List],
        revive: bool,
    ) -> Result<(), String> {
        // A list request tries the servers that are down again; a call does not wait for it.
        if revive {
            self.revive(profile).await;
        } else {
            self.revive_meanwhile(profile);
        }
        let _reading = profile.reading.lock().await;
        for &list in lists {
            let unread = profile.unread(list);
            if unread.is_empty() {
                continue;
            }
            let reads: Vec<(usize, Result<Vec<Value>, String>)> = futures_util::stream::iter(
                unread,
            )
            .map(|server| async move { (server, self.read_one(profile, server, list).await) })
            .buffer_unordered(self.flags.concurrency)
            .collect()
            .await;
            for (server, read) in reads {
                if let Err(why) = read.and_then(|items| profile.record(list, server, items)) {
                    tracing::error!(aggregate = %self.spec.name, server = %self.server_name(server), list = list.key(), "left out: {why}");
                    if self.spec.fail_closed {
                        return Err(format!(
                            "the {} of the server {:?} cannot be listed: {why} (this endpoint fails closed)",
                            list.key(),
                            self.server_name(server)
                        ));
                    }
                    profile.record(list, server, Vec::new()).ok();
                }
            }
        }
        if self.spec.fail_closed
            && let Some((name, ServerState::Down(why))) = self
                .states()
                .into_iter()
                .find(|(_, s)| matches!(s, ServerState::Down(_)))
        {
            return Err(format!(
                "the server {name:?} behind this endpoint is unavailable ({why}) and this endpoint fails closed"
            ));
        }
        Ok(())
    }

    /// Tries the servers that are down again (each at most every `--aggregate-retry-after`): one that
    /// answers is back in the lists.
    async fn revive(self: &Arc<Self>, profile: &Arc<Profile>) {
        let down: Vec<usize> = self
            .states()
            .iter()
            .enumerate()
            .filter(|(_, (_, s))| matches!(s, ServerState::Down(_)))
            .map(|(server, _)| server)
            .collect();
        futures_util::stream::iter(down)
            .map(|server| async move { self.scout(profile, server).await.ok() })
            .buffer_unordered(self.flags.concurrency)
            .collect::<Vec<_>>()
            .await;
    }

    async fn read_one(
        self: &Arc<Self>,
        profile: &Arc<Profile>,
        server: usize,
        list: List,
    ) -> Result<Vec<Value>, String> {
        let (session, handshake) = self.scout(profile, server).await?;
        if !scout::offers(&handshake, list) {
            return Ok(Vec::new());
        }
        let wait = self.flags.timeout;
        let read = tokio::time::timeout(
            wait,
            scout::read_list(&session, list, wait, self.flags.max_list_items),
        )
        .await;
        let why = match read {
            Ok(Ok(items)) => return Ok(items),
            Ok(Err(why)) if why.contains("--aggregate-max-list-items") => return Err(why),
            Ok(Err(why)) => why,
            Err(_) => format!(
                "no answer to {} within {} s (--aggregate-timeout)",
                list.method(),
                wait.as_secs_f64()
            ),
        };
        self.mark_down(server, why.clone());
        Err(why)
    }
}
