//! One request put to the policy: what it is about (a tool, prompt or resource, by the
//! server's own name; at an aggregate endpoint the member server it leads to), its
//! arguments, who sends it; and what follows: send it on, filter its list answer, or
//! answer it here. Methods the policy does not govern (`initialize`, `ping`, logging,
//! notifications, the client's answers) pass untouched.

use std::sync::Arc;

use serde_json::Value;

use super::about::{About, owner, public_of};
use super::answers;
use super::lists::ListFilter;
use crate::policy::{Client, Decision, Input, Phase, Policy, Principal, Target};
use crate::serve::backend::Owner;
use crate::serve::session::Session;

/// A request, with everything a rule sees about it.
pub struct Request<'a> {
    pub policy: &'a Arc<Policy>,
    pub principal: &'a Arc<Principal>,
    pub client: &'a Client,
    /// The server's name (a config file's; empty for the command line's one server).
    pub server: &'a str,
    pub endpoint: &'a str,
    pub method: &'a str,
    /// The client's id, raw JSON: a stopped request is answered under it.
    pub raw_id: &'a str,
    pub params: Option<&'a Value>,
    /// The session it goes to (its tools' annotations; at an aggregate endpoint, where a
    /// name leads).
    pub session: &'a Arc<Session>,
    /// The child speaks 2026-07-28 (a lookup of the gateway's own then carries the
    /// envelope).
    pub modern_child: bool,
    pub wait: std::time::Duration,
}

/// What the endpoint does with the request.
pub enum Verdict {
    /// Send it on.
    Pass,
    /// Send it on, and filter the list in its answer.
    Filter(ListFilter),
    /// Answer `line` instead (a handshake-era answer under the client's id); nothing
    /// reaches the server. `rule` is the rule that hid or refused it.
    Answer { line: Vec<u8>, rule: String },
}

const LISTS: [&str; 4] = [
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
];

/// The policy's verdict on `request`.
pub async fn check(request: &Request<'_>) -> Verdict {
    let policy = request.policy;
    if policy.is_empty() {
        return Verdict::Pass;
    }
    if LISTS.contains(&request.method) {
        return if policy.has(Phase::List) {
            Verdict::Filter(ListFilter {
                policy: policy.clone(),
                principal: request.principal.clone(),
                client: request.client.clone(),
                server: request.server.to_owned(),
                endpoint: request.endpoint.to_owned(),
                method: request.method.to_owned(),
                session: request.session.clone(),
                raw_id: request.raw_id.to_owned(),
            })
        } else {
            Verdict::Pass
        };
    }
    let params = request.params;
    let text = |key: &str| params.and_then(|p| p.get(key)).and_then(Value::as_str);
    let (about, arguments) = match request.method {
        "tools/call" => match text("name") {
            Some(name) => (About::Tool(name), params.and_then(|p| p.get("arguments"))),
            None => return Verdict::Pass,
        },
        "prompts/get" => match text("name") {
            Some(name) => (About::Prompt(name), params.and_then(|p| p.get("arguments"))),
            None => return Verdict::Pass,
        },
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => match text("uri") {
            Some(uri) => (About::Resource(uri), None),
            None => return Verdict::Pass,
        },
        "completion/complete" => match completion_ref(params) {
            Some(about) => (about, params.and_then(|p| p.get("argument"))),
            None => return Verdict::Pass,
        },
        "subscriptions/listen" => return listen(request),
        _ => return Verdict::Pass,
    };
    decide(request, about, arguments).await
}

/// A completion's reference: the prompt or resource template it completes for.
fn completion_ref(params: Option<&Value>) -> Option<About<'_>> {
    let reference = params?.get("ref")?;
    match reference.get("type")?.as_str()? {
        "ref/prompt" => Some(About::Prompt(reference.get("name")?.as_str()?)),
        "ref/resource" => Some(About::Resource(reference.get("uri")?.as_str()?)),
        _ => None,
    }
}

/// A 2026-07-28 listen subscribes to resources: each must be one the principal may use.
fn listen(request: &Request<'_>) -> Verdict {
    let uris = request
        .params
        .and_then(|p| p.pointer("/notifications/resourceSubscriptions"))
        .and_then(Value::as_array);
    for uri in uris.into_iter().flatten().filter_map(Value::as_str) {
        let about = About::Resource(uri);
        let owner = owner(request.session, about);
        if let Some((line, rule)) = stopped(request, &owner, about, None, None) {
            return Verdict::Answer { line, rule };
        }
    }
    Verdict::Pass
}

async fn decide(request: &Request<'_>, about: About<'_>, arguments: Option<&Value>) -> Verdict {
    let session = request.session;
    let mut owner = owner(session, about);
    if owner == Owner::Unknown && !matches!(about, About::Resource(_)) {
        // An aggregate endpoint knows its names once it has read its servers' lists (its
        // URIs it knows from the start): read them as the client would, then ask again.
        let list = match about {
            About::Prompt(_) => "prompts/list",
            _ => "tools/list",
        };
        session
            .tools
            .read(&*session.backend, list, request.modern_child, request.wait)
            .await;
        owner = self::owner(session, about);
    }
    let annotations = match about {
        About::Tool(name) if request.policy.reads_annotations() => {
            request
                .session
                .tools
                .of(
                    &*request.session.backend,
                    name,
                    request.modern_child,
                    request.wait,
                )
                .await
        }
        _ => None,
    };
    match stopped(request, &owner, about, arguments, annotations.as_ref()) {
        Some((line, rule)) => Verdict::Answer { line, rule },
        None => Verdict::Pass,
    }
}

/// The answer that stops the request, and the rule that stopped it, if the policy stops
/// it.
fn stopped(
    request: &Request<'_>,
    owner: &Owner,
    about: About<'_>,
    arguments: Option<&Value>,
    annotations: Option<&Value>,
) -> Option<(Vec<u8>, String)> {
    // At an aggregate endpoint the rule sees the member server and its own name. A name
    // it cannot place (its lists unreadable now, or published by no server) is not judged
    // by the wrong name: it is answered as unknown, which is what the endpoint would say
    // of a name no server publishes.
    let (server, own) = match owner {
        Owner::Member { server, name } => (server.as_str(), name.as_str()),
        Owner::Itself => (request.server, public_of(about)),
        Owner::Unknown => {
            return Some((answers::hidden(request.raw_id, about), "default".into()));
        }
    };
    let target = match about {
        About::Tool(_) => Target::Tool {
            name: own,
            annotations,
        },
        About::Prompt(_) => Target::Prompt { name: own },
        About::Resource(_) => Target::Resource { uri: own },
    };
    let input = Input {
        principal: request.principal,
        server,
        endpoint: request.endpoint,
        method: request.method,
        target,
        arguments,
        client: request.client,
    };
    match request.policy.call(&input) {
        Decision::Allow => None,
        Decision::Hidden { rule } => {
            tracing::debug!(rule = %rule, method = request.method, "the policy hides what this request is about");
            Some((answers::hidden(request.raw_id, about), rule))
        }
        Decision::Refused { rule, why } => {
            tracing::info!(rule = %rule, method = request.method, "the policy refused a request");
            Some((answers::refused(request.raw_id, about, &rule, &why), rule))
        }
    }
}
