//! What a legacy host declared in its `initialize` (its capabilities, as a modern request
//! declares them, and its client info) and what it set since (`logging/setLevel`): the
//! envelope stamped on every request translated for it.

use std::sync::{Arc, Mutex};

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
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    profile: Profile,
    /// The stamp's `_meta` members for one version, as JSON text: every translated request
    /// carries them, so they are written once, not per request.
    members: Option<(String, Arc<str>)>,
}

impl HostProfile {
    pub fn get(&self) -> Profile {
        self.inner.lock().expect("profile lock").profile.clone()
    }

    /// The envelope's `_meta` members for requests in `version` (see
    /// [`crate::era::envelope::stamped_params`]).
    pub fn stamp_members(&self, version: &str) -> Arc<str> {
        let mut inner = self.inner.lock().expect("profile lock");
        if let Some((for_version, members)) = &inner.members
            && for_version == version
        {
            return members.clone();
        }
        let members: Arc<str> = inner.profile.stamp(version).members().into();
        inner.members = Some((version.to_owned(), members.clone()));
        members
    }

    /// The envelope's `_meta` members for a request that opts in to the tasks extension
    /// (a legacy host's task-augmented call, its `tasks/*`): rare, so not kept.
    pub fn opted_in_members(&self, version: &str) -> Arc<str> {
        self.opted_in_stamp(version).members().into()
    }

    /// The envelope for a request of the relay's own about a task (opted in).
    pub fn opted_in_stamp(&self, version: &str) -> Stamp {
        let mut stamp = self.get().stamp(version);
        crate::era::tasks::declare_extension(&mut stamp.capabilities);
        stamp
    }

    /// Keeps what the host declared in `initialize`, whichever path answers it (the
    /// upstream's era may change later, and every translated request needs it).
    pub fn remember_initialize(&self, params: Option<&RawValue>) {
        let params: InitializeParams = params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or_default();
        let mut inner = self.inner.lock().expect("profile lock");
        inner.profile.capabilities = capabilities_for_modern(&params.capabilities);
        inner.profile.client_info = params.client_info.filter(Value::is_object);
        inner.members = None;
    }

    /// From `logging/setLevel`: sent on every later request.
    pub fn set_log_level(&self, level: String) {
        let mut inner = self.inner.lock().expect("profile lock");
        inner.profile.log_level = Some(level);
        inner.members = None;
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::value::RawValue;

    #[test]
    fn the_cached_members_follow_what_the_host_declared_and_set() {
        let profile = HostProfile::default();
        let before = profile.stamp_members("2026-07-28");
        assert!(!before.contains("logLevel"), "{before}");
        let params = RawValue::from_string(
            r#"{"capabilities":{"sampling":{}},"clientInfo":{"name":"h","version":"2"}}"#.into(),
        )
        .unwrap();
        profile.remember_initialize(Some(&params));
        let declared = profile.stamp_members("2026-07-28");
        assert!(declared.contains(r#""name":"h""#), "{declared}");
        assert!(declared.contains("sampling"), "{declared}");
        profile.set_log_level("debug".into());
        let leveled = profile.stamp_members("2026-07-28");
        assert!(
            leveled.contains(r#""io.modelcontextprotocol/logLevel":"debug""#),
            "{leveled}"
        );
        let other = profile.stamp_members("2026-09-01");
        assert!(other.contains("2026-09-01"), "{other}");
    }
}
