//! What a pooled child says tied to one of its tasks before the gateway holds the task (a
//! server that asks a task's question the moment it has answered the call that made it):
//! kept a short while for the task's holder, bounded, and never handed to another call.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;

/// The most lines kept, and for how long: the holder registers within moments of the
/// creation's answer, or never (the client went away, or the call was refused).
const MOST: usize = 64;
const LONGEST: Duration = Duration::from_secs(30);

struct Orphan {
    task: String,
    line: Bytes,
    at: Instant,
    /// The child's id, when the line is a request: it is refused if nobody takes it.
    asker: Option<String>,
}

#[derive(Default)]
pub struct Orphans {
    kept: Mutex<VecDeque<Orphan>>,
}

impl Orphans {
    /// Keeps `line`, tied to `task`; returns the ids of the child's requests given up (too
    /// old, or pushed out by newer lines), for the caller to refuse.
    pub fn keep(&self, task: String, line: Bytes, asker: Option<String>) -> Vec<String> {
        let mut kept = self.kept.lock().expect("orphans lock");
        let mut given_up = Vec::new();
        let now = Instant::now();
        while kept
            .front()
            .is_some_and(|o| now.duration_since(o.at) > LONGEST || kept.len() >= MOST)
        {
            given_up.extend(kept.pop_front().and_then(|o| o.asker));
        }
        kept.push_back(Orphan {
            task,
            line,
            at: now,
            asker,
        });
        given_up
    }

    /// The lines kept for `task`, in the order they came.
    pub fn take(&self, task: &str) -> Vec<Bytes> {
        let mut kept = self.kept.lock().expect("orphans lock");
        let (theirs, others): (VecDeque<Orphan>, VecDeque<Orphan>) =
            kept.drain(..).partition(|o| o.task == task);
        *kept = others;
        theirs.into_iter().map(|o| o.line).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_wait_for_their_task_and_the_oldest_request_is_given_up_when_full() {
        let orphans = Orphans::default();
        assert!(
            orphans
                .keep("a".into(), Bytes::from("1"), Some("\"q1\"".into()))
                .is_empty()
        );
        orphans.keep("b".into(), Bytes::from("2"), None);
        orphans.keep("a".into(), Bytes::from("3"), None);
        assert_eq!(orphans.take("a"), vec![Bytes::from("1"), Bytes::from("3")]);
        assert!(orphans.take("a").is_empty(), "taken once");
        assert_eq!(orphans.take("b"), vec![Bytes::from("2")]);
        for n in 0..MOST {
            orphans.keep("c".into(), Bytes::from(n.to_string()), Some(format!("{n}")));
        }
        let given_up = orphans.keep("c".into(), Bytes::from("last"), None);
        assert_eq!(
            given_up,
            vec!["0".to_owned()],
            "the oldest request, to be refused"
        );
        assert_eq!(orphans.take("c").len(), MOST);
    }
}
