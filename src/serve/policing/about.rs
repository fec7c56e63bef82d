//! What a request is about (a tool, a prompt, a resource), and whose it is: at an
//! aggregate endpoint, a member server's, under that server's own name.

use serde_json::{Map, Value};

use crate::serve::backend::{Named, Owner};
use crate::serve::session::Session;

/// What a request is about, by the name or URI its client uses.
#[derive(Debug, Clone, Copy)]
pub enum About<'a> {
    Tool(&'a str),
    Prompt(&'a str),
    Resource(&'a str),
}

pub fn public_of(about: About<'_>) -> &str {
    match about {
        About::Tool(name) | About::Prompt(name) => name,
        About::Resource(uri) => uri,
    }
}

/// Whose a public name or URI is: at an aggregate endpoint, a member server's.
pub fn owner(session: &Session, about: About<'_>) -> Owner {
    let (named, public) = match about {
        About::Tool(name) => (Named::Tool, name),
        About::Prompt(name) => (Named::Prompt, name),
        About::Resource(uri) => (Named::Resource, uri),
    };
    session.backend.owner_of(named, public)
}

/// The name or URI of the one tool, prompt or resource a request of `method` is about.
pub fn item_of<'a>(method: &str, params: &'a Map<String, Value>) -> Option<&'a str> {
    let key = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => "uri",
        _ => return None,
    };
    params.get(key).and_then(Value::as_str)
}

/// The member server a request about `item` goes to at an aggregate endpoint (for its
/// audit line): `None` elsewhere.
pub fn member_of(session: &Session, method: &str, item: &str) -> Option<String> {
    let about = match method {
        "tools/call" => About::Tool(item),
        "prompts/get" => About::Prompt(item),
        _ => About::Resource(item),
    };
    match owner(session, about) {
        Owner::Member { server, .. } => Some(server),
        Owner::Itself | Owner::Unknown => None,
    }
}
