//! The `input_required` round, shared by the relay (a 2026-07-28 host in front of a legacy
//! server) and `serve` (a 2026-07-28 client in front of a handshake-era child). A legacy
//! peer asks its questions (elicitation, sampling, roots) as requests in the middle of a
//! call; a 2026-07-28 peer can only be asked through an `input_required` result and answers
//! by retrying. So the call stays open (parked), the asker's question goes out with a
//! `requestState` naming the parked call, and the retry either answers it, asks again, or
//! is refused. Each side supplies only what differs: how the answer reaches the asker (a
//! POST upstream in the relay, the child's stdin in serve) and what an expired round does.

mod round;
mod table;

pub use round::{Asked, Question, Resumed, Retry, Rounds};
pub use table::{Parked, Sealing};
