//! The policy in front of serve's endpoints (`--policy FILE`, a config file's `[policy]`):
//! one set of rules for the listener, swapped whole on SIGHUP, and what each request of an
//! endpoint gets from it: refused or hidden before anything reaches the server
//! (`request.rs`, answered as `answers.rs` writes), or a list answer filtered on its way
//! back (`lists.rs`). The rules themselves (`crate::policy`) know nothing of JSON-RPC.

mod about;
mod answers;
mod lists;
mod request;

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use crate::policy::{Limits, Policy, Principal, RuleSpec};

pub use about::{item_of, member_of};
pub use lists::ListFilter;
pub use request::{Request, Verdict, check};

/// Where the listener's rules come from: `--policy FILE` (and, with `--config`, the
/// file's `[policy]` table), within the `--policy-max-*` bounds.
#[derive(Debug, Clone, Default)]
pub struct PolicySource {
    pub file: Option<PathBuf>,
    pub limits: Limits,
}

impl PolicySource {
    /// The rules of `--policy FILE` after `inline` (a config file's own); each problem
    /// names the file.
    pub fn rules(&self, inline: Vec<RuleSpec>) -> Result<Vec<RuleSpec>, String> {
        let mut rules = inline;
        if let Some(path) = &self.file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("--policy {}: cannot read it: {e}", path.display()))?;
            let more = crate::policy::parse(&text)
                .map_err(|e| format!("--policy {}: {e}", path.display()))?;
            rules.extend(more);
        }
        Ok(rules)
    }

    /// The policy of a command line without `--config`: `None` without `--policy`.
    pub fn load(&self) -> Result<Option<Arc<Policing>>, String> {
        if self.file.is_none() {
            return Ok(None);
        }
        let rules = self.rules(Vec::new())?;
        Policing::new(rules, self.limits).map(|p| Some(Arc::new(p)))
    }

    /// SIGHUP: reads the rules again; a policy that does not load changes nothing.
    pub fn reload(&self, policing: &Policing, inline: Vec<RuleSpec>) -> Result<usize, String> {
        let policy = policing.check(self.rules(inline)?)?;
        let rules = policy.len();
        policing.replace(policy);
        Ok(rules)
    }
}

/// The listener's policy: every endpoint reads the current one per request.
#[derive(Debug)]
pub struct Policing {
    current: RwLock<Arc<Policy>>,
    limits: Limits,
}

impl Policing {
    /// Compiles `specs`; every problem is named.
    pub fn new(specs: Vec<RuleSpec>, limits: Limits) -> Result<Policing, String> {
        let policy = compile(specs, &limits)?;
        Ok(Policing {
            current: RwLock::new(Arc::new(policy)),
            limits,
        })
    }

    /// The rules in force now (a request keeps the ones it started with).
    pub fn current(&self) -> Arc<Policy> {
        self.current.read().expect("policy lock").clone()
    }

    /// Checks `specs` without applying them (a reload judges the whole file first). A
    /// policy with rules is not replaced by one without (which allows everything): a file
    /// caught half written reads as empty.
    pub fn check(&self, specs: Vec<RuleSpec>) -> Result<Policy, String> {
        let policy = compile(specs, &self.limits)?;
        if policy.is_empty() && !self.current().is_empty() {
            return Err("the policy now has no rules, and a policy without rules allows everything; to mean that, write an allow rule for each phase (when = \"true\")".into());
        }
        Ok(policy)
    }

    /// Puts a checked policy in force.
    pub fn replace(&self, policy: Policy) {
        *self.current.write().expect("policy lock") = Arc::new(policy);
    }
}

fn compile(specs: Vec<RuleSpec>, limits: &Limits) -> Result<Policy, String> {
    let policy = Policy::new(specs, limits).map_err(|e| format!("the policy: {e}"))?;
    for warning in policy.warnings() {
        tracing::warn!("the policy: {warning}");
    }
    Ok(policy)
}

/// The caller of an endpoint that checks no one: not signed in, no claims.
pub fn anonymous() -> Arc<Principal> {
    static ANONYMOUS: std::sync::LazyLock<Arc<Principal>> =
        std::sync::LazyLock::new(|| Arc::new(Principal::default()));
    ANONYMOUS.clone()
}
