//! What a legacy host declared in its `initialize` (its capabilities, as a modern request
//! declares them, and its client info) and what it set since (`logging/setLevel`): the
//! envelope stamped on every request translated for it.

use std::sync::Mutex;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::era;
use crate::era::bridge::capabilities_for_modern;
use crate::era::envelope::Stamp;

/// What the legacy host declared in its `initialize`, and what it set since.
#[derive(Debug, Clone)]
pub struct Profile {
    /// Its capabilities as a modern request declares them (never wider).
    pub capabilities: Value,
    pub client_info: Option<Value>,
    /// From `logging/setLevel`, sent as `io.modelcontextprotocol/logLevel`.
    pub log_level: Option<String>,
}

impl Default for Profile {
    fn default() -> Self {
        Self {
            capabilities: json!({}),
            client_info: None,
            log_level: None,
        }
    }
}

impl Profile {
    pub fn stamp(&self, version: &str) -> Stamp {
        Stamp {
            version: version.to_owned(),
            capabilities: self.capabilities.clone(),
            client_info: self.client_info.clone().unwrap_or_else(era::relay_info),
            log_level: self.log_level.clone(),
        }
    }
}

/// The host's profile, kept for every request translated on its behalf.
#[derive(Default)]
pub struct HostProfile {
    profile: Mutex<Profile>,
}

impl HostProfile {
    pub fn get(&self) -> Profile {
        self.profile.lock().expect("profile lock").clone()
    }

    /// Keeps what the host declared in `initialize`, whichever path answers it (the
    /// upstream's era may change later, and every translated request needs it).
    pub fn remember_initialize(&self, params: Option<&RawValue>) {
        let params: InitializeParams = params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or_default();
        let mut profile = self.profile.lock().expect("profile lock");
        profile.capabilities = capabilities_for_modern(&params.capabilities);
        profile.client_info = params.client_info.filter(Value::is_object);
    }

    /// From `logging/setLevel`: sent on every later request.
    pub fn set_log_level(&self, level: String) {
        self.profile.lock().expect("profile lock").log_level = Some(level);
    }
}

#[derive(Deserialize, Default)]
pub struct InitializeParams {
    #[serde(rename = "protocolVersion")]
    pub protocol_version: Option<String>,
    #[serde(default)]
    pub capabilities: Value,
    #[serde(rename = "clientInfo")]
    pub client_info: Option<Value>,
}
