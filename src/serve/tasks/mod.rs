//! Tasks for 2026-07-28 clients in front of a handshake-era child that runs tools as
//! 2025-11-25 tasks (the table they are kept in is `task_table`): the held `tasks/result` that
//! follows each one in the child, the adoption of a child's `CreateTaskResult`, and the
//! extension's `tasks/*` methods answered from them.

mod create;
mod held;
mod methods;
mod view;

pub use create::{Planned, adopt, plan};
pub use methods::{answer, child_runs_tool_tasks};
