//! What a request is about (a tool, a prompt, a resource), and whose it is: at an
//! aggregate endpoint, a member server's, under that server's own name.

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
