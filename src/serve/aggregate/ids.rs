//! Request ids across the aggregate endpoint's backends. A client's call runs on one
//! backend, which is where its cancellation must go (`Running`). A backend's own question
//! to the client (sampling, elicitation, roots) is sent under an id of the gateway's, since
//! two backends may both use id 1, and the client's answer goes back to the backend that
//! asked, under that backend's own id (`Questions`). Pure: the caller sends.

use std::collections::HashMap;

use crate::jsonrpc::message::IdKey;

/// The client's requests in flight, and the backend each runs on.
#[derive(Debug, Default)]
pub struct Running {
    on: HashMap<IdKey, usize>,
}

impl Running {
    pub fn start(&mut self, id: IdKey, server: usize) {
        self.on.insert(id, server);
    }

    /// The backend to tell about a `notifications/cancelled` for `id`, if it runs.
    pub fn server_of(&self, id: &IdKey) -> Option<usize> {
        self.on.get(id).copied()
    }

    pub fn end(&mut self, id: &IdKey) {
        self.on.remove(id);
    }
}

/// Backends' questions to the client, under the gateway's ids. At most `most` are kept
/// unanswered (a client that never answers must not grow it): past that the oldest is
/// forgotten, and its answer, if it ever comes, goes nowhere.
#[derive(Debug)]
pub struct Questions {
    next: u64,
    most: usize,
    /// gateway id → the backend that asked and its id, as written (raw JSON).
    asked: HashMap<String, (usize, String)>,
    /// The gateway ids in the order asked, oldest first.
    order: std::collections::VecDeque<String>,
}

impl Default for Questions {
    fn default() -> Self {
        Questions::new(1024)
    }
}

impl Questions {
    pub fn new(most: usize) -> Self {
        Questions {
            next: 0,
            most: most.max(1),
            asked: HashMap::new(),
            order: std::collections::VecDeque::new(),
        }
    }

    /// Records a backend's question (its id as raw JSON text) and gives the id to send it
    /// to the client under, as raw JSON text.
    pub fn ask(&mut self, server: usize, backend_id: &str) -> String {
        self.next += 1;
        let id = format!("mcp-stdio-aggregate-{server}-{}", self.next);
        let raw = serde_json::to_string(&id).expect("a string serializes");
        while self.asked.len() >= self.most {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if self.asked.remove(&oldest).is_some() {
                tracing::warn!(id = %oldest, "a server's question was never answered; forgotten to make room");
            }
        }
        self.order.push_back(id.clone());
        self.asked.insert(id, (server, backend_id.to_owned()));
        // Answered ids leave `order` lazily; keep it from growing past the bound twice over.
        if self.order.len() > self.most * 2 {
            let asked = &self.asked;
            self.order.retain(|id| asked.contains_key(id));
        }
        raw
    }

    /// The backend and its own id (raw) for the client's answer to `id`; `None` for an
    /// answer to nothing this gateway asked. Each answer is taken once.
    pub fn answered(&mut self, id: &IdKey) -> Option<(usize, String)> {
        match id {
            IdKey::Str(id) => self.asked.remove(id),
            IdKey::Num(_) => None,
        }
    }

    /// A backend withdrew its question (`notifications/cancelled`, its own id as raw
    /// JSON): the gateway id the client knows it by (raw JSON), now forgotten.
    pub fn withdrawn(&mut self, server: usize, backend_id: &str) -> Option<String> {
        let found = self
            .asked
            .iter()
            .find(|(_, (s, id))| *s == server && id.as_str() == backend_id)
            .map(|(gateway, _)| gateway.clone())?;
        self.asked.remove(&found);
        Some(serde_json::to_string(&found).expect("a string serializes"))
    }

    pub fn pending(&self) -> usize {
        self.asked.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::value::RawValue;

    #[test]
    fn a_withdrawn_question_is_named_as_the_client_knows_it() {
        let mut questions = Questions::new(8);
        let asked = questions.ask(1, "7");
        assert_eq!(questions.withdrawn(0, "7"), None, "another server's id 7");
        assert_eq!(questions.withdrawn(1, "7"), Some(asked));
        assert_eq!(questions.pending(), 0);
    }

    #[test]
    fn unanswered_questions_are_bounded_oldest_first() {
        let mut questions = Questions::new(2);
        let first = questions.ask(0, "1");
        let second = questions.ask(1, "2");
        let third = questions.ask(0, "3");
        assert_eq!(questions.pending(), 2);
        let id = |raw: &str| IdKey::Str(serde_json::from_str(raw).unwrap());
        assert_eq!(
            questions.answered(&id(&first)),
            None,
            "the oldest was forgotten"
        );
        assert_eq!(questions.answered(&id(&second)), Some((1, "2".into())));
        assert_eq!(questions.answered(&id(&third)), Some((0, "3".into())));
        for n in 0..100 {
            let asked = questions.ask(0, &n.to_string());
            questions.answered(&id(&asked));
        }
        assert!(questions.order.len() <= 4, "answered ids do not pile up");
    }

    fn key(raw: &str) -> IdKey {
        IdKey::from_raw(&RawValue::from_string(raw.to_owned()).unwrap()).unwrap()
    }

    #[test]
    fn a_cancellation_finds_the_backend_that_runs_the_call() {
        let mut running = Running::default();
        running.start(key("1"), 0);
        running.start(key("\"1\""), 1);
        assert_eq!(running.server_of(&key("1")), Some(0));
        assert_eq!(running.server_of(&key("\"1\"")), Some(1));
        running.end(&key("1"));
        assert_eq!(running.server_of(&key("1")), None);
        running.end(&key("\"1\""));
        assert_eq!(running.server_of(&key("\"1\"")), None);
    }

    #[test]
    fn two_backends_asking_under_the_same_id_get_their_own_answers() {
        let mut questions = Questions::default();
        let first = questions.ask(0, "1");
        let second = questions.ask(1, "1");
        assert_ne!(first, second);
        assert_eq!(questions.answered(&key(&second)), Some((1, "1".to_owned())));
        assert_eq!(
            questions.answered(&key(&second)),
            None,
            "an answer is taken once"
        );
        assert_eq!(
            questions.answered(&key("1")),
            None,
            "not an id the gateway gave"
        );
        assert_eq!(questions.answered(&key(&first)), Some((0, "1".to_owned())));
        assert_eq!(questions.pending(), 0);
    }
}
