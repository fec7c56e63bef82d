//! `mcp-stdio serve --config FILE --aggregate`: the flags of the aggregate endpoint (every
//! server of the file behind one path), checked into `AggregateFlags`.

use std::time::Duration;

use clap::Args;

use super::{non_negative_seconds, positive_seconds};
use crate::serve::aggregate::names::{DEFAULT_SEPARATOR, check_separator};
use crate::serve::aggregator::AggregateFlags;

#[derive(Debug, Args)]
pub struct AggregateArgs {
    /// With --config: every server of the file also at one endpoint, --path (default
    /// /mcp), its tools and prompts named SERVER__NAME and its resources SERVER+URI. The
    /// file's `[aggregates.NAME]` tables name more endpoints, each with its own servers.
    #[arg(long)]
    pub(super) aggregate: bool,

    /// What joins a server's name and its tools' and prompts' names at an aggregate
    /// endpoint: 1 to 4 of '_' and '-', so every name keeps to ^[a-zA-Z0-9_-]{1,64}$.
    #[arg(long, value_name = "TEXT", default_value = DEFAULT_SEPARATOR)]
    aggregate_separator: String,

    /// What an aggregate endpoint does while one of its servers is down: `open` leaves it
    /// out of lists and tells its calls it is down, the others go on; `closed` refuses
    /// the endpoint's lists and new sessions until every server answers.
    #[arg(long, value_enum, default_value = "open")]
    aggregate_fail: FailArg,

    /// Seconds an aggregate endpoint waits for one server to start, answer its handshake,
    /// or give one of its lists, before leaving it out as down.
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = positive_seconds, allow_hyphen_values = true)]
    aggregate_timeout: Duration,

    /// Servers an aggregate endpoint asks at once when it reads every server's lists or
    /// sends `ping` and `logging/setLevel` to each.
    #[arg(long, value_name = "N", default_value = "8", value_parser = clap::value_parser!(u64).range(1..=1024))]
    aggregate_concurrency: u64,

    /// The most tools (or prompts, resources, templates) one aggregate endpoint lists from
    /// all its servers together; a server whose list would pass it is left out of that
    /// list, with an error naming it in the log.
    #[arg(long, value_name = "N", default_value = "10000", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    aggregate_max_list_items: u64,

    /// Items per page of an aggregate endpoint's lists (its own cursor gives the next);
    /// large, so that a host that reads only the first page still sees everything.
    #[arg(long, value_name = "N", default_value = "1000", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    aggregate_page_size: u64,

    /// Seconds a server that failed (did not start, answer or list) is left out of an
    /// aggregate endpoint before it is tried again; a session with it that ends sooner
    /// than this after it began is not restarted until asked. 0: tried on every request.
    #[arg(long, value_name = "SECONDS", default_value = "2", value_parser = non_negative_seconds, allow_hyphen_values = true)]
    aggregate_retry_after: Duration,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum FailArg {
    Open,
    Closed,
}

/// The aggregate flags, checked; `with_config` says whether `--config` was given (they
/// mean nothing without a file of servers).
pub fn aggregate_flags(args: &AggregateArgs, with_config: bool) -> Result<AggregateFlags, String> {
    if args.aggregate && !with_config {
        return Err("--aggregate publishes the servers of a --config file at one endpoint: give --config FILE (one command after `--` is already one endpoint)".into());
    }
    check_separator(&args.aggregate_separator)
        .map_err(|e| format!("--aggregate-separator: {e}"))?;
    Ok(AggregateFlags {
        at_path: args.aggregate,
        separator: args.aggregate_separator.clone(),
        fail_closed: matches!(args.aggregate_fail, FailArg::Closed),
        timeout: args.aggregate_timeout,
        concurrency: args.aggregate_concurrency as usize,
        max_list_items: args.aggregate_max_list_items as usize,
        page_size: args.aggregate_page_size as usize,
        retry_after: args.aggregate_retry_after,
    })
}
