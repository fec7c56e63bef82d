//! The state of a 2026-07-28 host's path to a legacy server (`ToLegacy`): the session's
//! `initialize` result, the host's subscriptions, the upstream ids of its calls, the calls
//! that may ask it something, and the calls parked for its retry.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::{OnceCell, mpsc};

use super::parked::Parked;
use crate::era::listen::{self, Filter};
use crate::jsonrpc::message::IdKey;
use crate::parking::Question;
use crate::relay::context::Ctx;

/// One `subscriptions/listen` of the host, served by the relay.
pub struct Subscription {
    pub raw_id: String,
    pub filter: Filter,
}

#[derive(Default)]
pub struct ModernHost {
    /// The server's `initialize` result, once the handshake is done.
    pub session: OnceCell<Value>,
    pub subscriptions: Mutex<HashMap<IdKey, Subscription>>,
    /// Host id → the upstream id its request was sent under, for cancellation.
    pub upstream_ids: Mutex<HashMap<IdKey, String>>,
    pub log_level_sent: tokio::sync::Mutex<Option<String>>,
    /// Calls in progress that may ask the host something, by flight number: where a
    /// question that arrives on the session's own stream goes when only one could be its.
    pub flights: Mutex<HashMap<u64, mpsc::UnboundedSender<Question>>>,
    pub next_flight: std::sync::atomic::AtomicU64,
}

impl ModernHost {
    /// The upstream id a host request was sent under, if it is in flight.
    pub fn upstream_id_of(&self, host_id: &IdKey) -> Option<String> {
        self.upstream_ids
            .lock()
            .expect("ids lock")
            .get(host_id)
            .cloned()
    }

    /// The lines a notification from the server becomes for the host's subscriptions:
    /// one per matching subscription, tagged with its id.
    pub fn for_subscriptions(&self, method: &str, params: Option<&Value>) -> Vec<Vec<u8>> {
        let subscriptions = self.subscriptions.lock().expect("subscriptions lock");
        subscriptions
            .values()
            .filter(|s| s.filter.wants(method, params))
            .map(|s| {
                let subscription_id: Value = serde_json::from_str(&s.raw_id).unwrap_or(Value::Null);
                listen::tagged(method, params, &subscription_id)
            })
            .collect()
    }
}

/// The path of a modern host in front of a legacy server: its state, and the context its
/// tasks run in.
pub struct ToLegacy {
    pub ctx: Arc<Ctx>,
    pub host: ModernHost,
    /// Legacy server calls waiting for the host's input.
    pub parked: Arc<Parked>,
}

impl ToLegacy {
    pub fn new(ctx: Arc<Ctx>) -> Arc<Self> {
        Arc::new(ToLegacy {
            parked: Parked::new(ctx.config.input_timeout),
            ctx,
            host: ModernHost::default(),
        })
    }

    /// The upstream id a host request was sent under, if it is in flight.
    pub fn upstream_id_of(&self, host_id: &IdKey) -> Option<String> {
        self.host.upstream_id_of(host_id)
    }
}
