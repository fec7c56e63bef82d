//! Who may use what behind `serve`: rules written in CEL, each for one phase (`list`: what
//! a principal sees in the lists; `call`: what it may do), with the effect allow, deny or
//! require, compiled and checked at load (`rule.rs`), fed the request's facts
//! (`input.rs`), and decided in one documented order (`decide.rs`). Pure: no I/O, and
//! nothing here knows JSON-RPC; `file.rs` only parses a policy file's text.

mod cost;
mod decide;
mod file;
mod input;
mod memo;
mod names;
mod rule;

pub use decide::{Decision, Policy, Step};
pub use file::{parse, parse_value};
pub use input::{Client, Input, Principal, Target};
pub use rule::{Effect, Limits, Phase, RuleSpec};

#[cfg(test)]
mod tests;
