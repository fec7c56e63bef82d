//! One parking round as a state machine: ask (park the call, answer `input_required`),
//! then on each retry answer the asker, ask again, or refuse with what would work.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::table::Parked;

/// What the asker (the legacy peer) asked during a call.
#[derive(Debug)]
pub struct Question {
    /// Its key in `inputRequests` and, in the retry, `inputResponses`.
    pub key: &'static str,
    /// The asker's id for its request, byte for byte, for the answer.
    pub asker_raw_id: String,
    pub method: String,
    pub params: Value,
}

impl Question {
    pub fn new(asker_raw_id: String, method: String, params: Value) -> Self {
        Self {
            key: input_key(&method),
            asker_raw_id,
            method,
            params,
        }
    }

    /// The `inputRequests` object that asks it.
    fn input_requests(&self) -> Value {
        json!({ self.key: {"method": self.method, "params": self.params} })
    }
}

/// The key a question of `method` gets in `inputRequests`.
fn input_key(method: &str) -> &'static str {
    match method {
        "elicitation/create" => "elicitation",
        "sampling/createMessage" => "sampling",
        _ => "roots",
    }
}

/// The request that was answered with `input_required`, as far as its state is bound to it.
pub struct Asked<'a> {
    /// The client's id for the request, for the `input_required` answer.
    pub raw_id: &'a str,
    pub principal: Option<String>,
    pub method: &'a str,
    /// The tool, prompt or resource it is about.
    pub name: Option<&'a str>,
}

/// A retry that carries `requestState`.
pub struct Retry<'a> {
    pub raw_id: &'a str,
    pub principal: Option<&'a str>,
    pub method: &'a str,
    pub name: Option<&'a str>,
    /// `requestState` if it is a string (anything else names no call).
    pub state: Option<&'a str>,
    /// `inputResponses`, if the retry has it.
    pub responses: Option<&'a Value>,
}

/// What a retry leads to.
pub enum Resumed<T> {
    /// The call, and the asker's answer (a JSON-RPC response under the asker's id) to
    /// deliver before following the call on.
    Answered { call: T, answer: Vec<u8> },
    /// The question was not answered: the same `input_required` answer again, under the
    /// same state (missing responses SHOULD lead to a new round rather than an error).
    AskAgain(Vec<u8>),
    /// Refused with this message (an invalid-params error); a malformed answer leaves the
    /// call parked for a corrected retry.
    Invalid(String),
}

struct Waiting<T> {
    call: T,
    question: Question,
}

/// The parked calls of one side, each waiting at most `timeout` for its retry.
pub struct Rounds<T> {
    table: Parked<Waiting<T>>,
    timeout: Duration,
}

impl<T: Send + 'static> Rounds<T> {
    pub fn new(timeout: Duration) -> Arc<Self> {
        Arc::new(Self {
            table: Parked::default(),
            timeout,
        })
    }

    /// Rounds whose states are sealed and name this replica (`serve` among replicas).
    pub fn sealed(timeout: Duration, sealing: super::Sealing) -> Arc<Self> {
        Arc::new(Self {
            table: Parked::sealed(sealing),
            timeout,
        })
    }

    /// The replica a retry's `requestState` names, if it is sealed by this cluster.
    pub fn owner(&self, state: &str) -> Option<String> {
        self.table.owner(state)
    }

    /// How many calls wait for a retry.
    pub fn count(&self) -> usize {
        self.table.count()
    }

    /// Parks `call`, which asked `question` during `asked`, and returns the
    /// `input_required` answer for the client. A round not retried within the timeout is
    /// taken out and given to `expired` (which tells the asker and ends its call).
    pub fn ask(
        self: &Arc<Self>,
        call: T,
        question: Question,
        asked: Asked<'_>,
        expired: impl FnOnce(T, Question) + Send + 'static,
    ) -> Vec<u8> {
        let requests = question.input_requests();
        let (number, state) = self.table.park(
            Waiting { call, question },
            asked.principal,
            asked.method,
            asked.name,
        );
        let rounds = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(rounds.timeout).await;
            if let Some(waiting) = rounds.table.expire(number) {
                tracing::info!(
                    parked = number,
                    timeout_s = rounds.timeout.as_secs_f64(),
                    "an input_required round was not answered within --input-timeout; the call is cancelled"
                );
                expired(waiting.call, waiting.question);
            }
        });
        input_required(asked.raw_id, &requests, &state)
    }

    /// Follows a retry. `still_valid` may refuse a call whose asker is gone (it is then
    /// dropped, ending it).
    pub fn resume(
        &self,
        retry: &Retry<'_>,
        still_valid: impl FnOnce(&T) -> Result<(), String>,
    ) -> Resumed<T> {
        let taken = retry.state.and_then(|state| {
            self.table
                .resume(state, retry.principal, retry.method, retry.name)
        });
        let Some((number, waiting)) = taken else {
            return Resumed::Invalid(
                "requestState is not valid: it was altered, has expired (--input-timeout) or was already used, or belongs to another call; call again without it".into(),
            );
        };
        if let Err(why) = still_valid(&waiting.call) {
            return Resumed::Invalid(why);
        }
        let key = waiting.question.key;
        let response = match retry.responses {
            None => None,
            Some(Value::Object(responses)) => responses.get(key),
            Some(_) => {
                self.put_back(number, waiting, retry.principal);
                return Resumed::Invalid(format!(
                    "inputResponses must be an object keyed like inputRequests (here: \"{key}\")"
                ));
            }
        };
        let Some(response) = response else {
            let again = input_required(
                retry.raw_id,
                &waiting.question.input_requests(),
                retry.state.unwrap_or_default(),
            );
            self.put_back(number, waiting, retry.principal);
            return Resumed::AskAgain(again);
        };
        if !response.is_object() {
            let why = format!(
                "inputResponses.{key} must be the result object of {}",
                waiting.question.method
            );
            self.put_back(number, waiting, retry.principal);
            return Resumed::Invalid(why);
        }
        let answer = format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{response}}}"#,
            waiting.question.asker_raw_id
        )
        .into_bytes();
        Resumed::Answered {
            call: waiting.call,
            answer,
        }
    }

    fn put_back(&self, number: u64, waiting: Waiting<T>, principal: Option<&str>) {
        self.table
            .put_back(number, waiting, principal.map(str::to_owned));
    }
}

fn input_required(raw_id: &str, requests: &Value, state: &str) -> Vec<u8> {
    format!(
        r#"{{"jsonrpc":"2.0","id":{raw_id},"result":{{"resultType":"input_required","inputRequests":{requests},"requestState":{}}}}}"#,
        Value::from(state)
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(principal: &str) -> Asked<'static> {
        Asked {
            raw_id: "1",
            principal: Some(principal.into()),
            method: "tools/call",
            name: Some("deploy"),
        }
    }

    fn retry<'a>(state: &'a str, responses: Option<&'a Value>) -> Retry<'a> {
        Retry {
            raw_id: "2",
            principal: Some("alice"),
            method: "tools/call",
            name: Some("deploy"),
            state: Some(state),
            responses,
        }
    }

    fn state_of(line: &[u8]) -> String {
        let value: Value = serde_json::from_slice(line).unwrap();
        value["result"]["requestState"].as_str().unwrap().to_owned()
    }

    fn question() -> Question {
        Question::new(
            r#""srv-1""#.into(),
            "elicitation/create".into(),
            json!({"message": "ok?"}),
        )
    }

    #[tokio::test]
    async fn a_round_asks_asks_again_refuses_malformed_answers_and_answers_once() {
        let rounds = Rounds::new(Duration::from_secs(60));
        let line = rounds.ask("call", question(), asked("alice"), |_, _| {});
        let value: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(value["id"], 1);
        assert_eq!(value["result"]["resultType"], "input_required");
        assert_eq!(
            value["result"]["inputRequests"]["elicitation"]["method"],
            "elicitation/create"
        );
        let state = state_of(&line);

        // No inputResponses, or none under the question's key: asked again, same state.
        for responses in [None, Some(json!({"other": {}}))] {
            let Resumed::AskAgain(again) =
                rounds.resume(&retry(&state, responses.as_ref()), |_| Ok(()))
            else {
                panic!("expected the question again")
            };
            assert_eq!(state_of(&again), state);
            assert_eq!(serde_json::from_slice::<Value>(&again).unwrap()["id"], 2);
        }
        // Malformed: refused, still parked.
        for responses in [json!(5), json!({"elicitation": 5})] {
            assert!(matches!(
                rounds.resume(&retry(&state, Some(&responses)), |_| Ok(())),
                Resumed::Invalid(_)
            ));
        }
        assert_eq!(rounds.count(), 1);
        // Someone else's retry of it: refused, still parked.
        let mut bob = retry(&state, None);
        bob.principal = Some("bob");
        assert!(matches!(
            rounds.resume(&bob, |_| Ok(())),
            Resumed::Invalid(_)
        ));
        assert_eq!(rounds.count(), 1);

        let accept = json!({"elicitation": {"action": "accept"}});
        let Resumed::Answered { call, answer } =
            rounds.resume(&retry(&state, Some(&accept)), |_| Ok(()))
        else {
            panic!("expected the answer")
        };
        assert_eq!(call, "call");
        let answer: Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(
            answer,
            json!({"jsonrpc": "2.0", "id": "srv-1", "result": {"action": "accept"}})
        );
        assert_eq!(rounds.count(), 0);
        assert!(matches!(
            rounds.resume(&retry(&state, Some(&accept)), |_| Ok(())),
            Resumed::Invalid(_)
        ));
    }

    #[tokio::test]
    async fn a_call_whose_asker_is_gone_is_refused_and_dropped() {
        let rounds = Rounds::new(Duration::from_secs(60));
        let state = state_of(&rounds.ask("call", question(), asked("alice"), |_, _| {}));
        let accept = json!({"elicitation": {}});
        let Resumed::Invalid(why) =
            rounds.resume(&retry(&state, Some(&accept)), |_| Err("restarted".into()))
        else {
            panic!("expected a refusal")
        };
        assert_eq!(why, "restarted");
        assert_eq!(rounds.count(), 0);
    }

    #[tokio::test]
    async fn an_unretried_round_expires_into_its_handler() {
        let rounds = Rounds::new(Duration::from_millis(20));
        let (tx, rx) = tokio::sync::oneshot::channel();
        rounds.ask("call", question(), asked("alice"), move |call, question| {
            let _ = tx.send((call, question.asker_raw_id));
        });
        assert_eq!(rounds.count(), 1);
        let (call, asker) = tokio::time::timeout(Duration::from_secs(10), rx)
            .await
            .expect("expired within the deadline")
            .expect("expired");
        assert_eq!((call, asker.as_str()), ("call", r#""srv-1""#));
        assert_eq!(rounds.count(), 0);
    }
}
