//! `mcp-stdio policy check FILE --as PRINCIPAL.json --call TOOL …`: what a policy file
//! decides for one request, offline, with every rule's verdict (exit 0 allowed, 1 hidden
//! or refused, 2 a bad file or flag).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::Value;

use super::{EXIT_USAGE, report_usage_error};
use crate::policy::{Client, Decision, Input, Limits, Policy, Principal, Target};

#[derive(Debug, Args)]
pub struct PolicyArgs {
    #[command(subcommand)]
    command: PolicyCommand,
}

#[derive(Debug, Subcommand)]
enum PolicyCommand {
    /// Explain what a policy file decides for one request: every rule's verdict, then the
    /// decision (exit 0 allowed, 1 hidden or refused).
    Check(Box<CheckArgs>),
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("what").required(true))]
struct CheckArgs {
    /// The policy file (TOML: `[[rules]]` with name, phase, effect, when, message).
    file: PathBuf,
    /// The caller: a JSON file with `sub`, `claims`, `scopes`, `user`, `groups`, or a
    /// token's claims as they are (then `sub` and `scope` come from them). Default: an
    /// anonymous caller.
    #[arg(long = "as", value_name = "PRINCIPAL.json")]
    principal: Option<PathBuf>,
    /// A `tools/call` of this tool.
    #[arg(long, value_name = "TOOL", group = "what")]
    call: Option<String>,
    /// A `resources/read` of this URI.
    #[arg(long, value_name = "URI", group = "what")]
    read: Option<String>,
    /// A `prompts/get` of this prompt.
    #[arg(long, value_name = "NAME", group = "what")]
    prompt: Option<String>,
    /// Only whether the lists show it (the list phase), not whether it may be used.
    #[arg(long)]
    list: bool,
    /// The call's arguments, a JSON object.
    #[arg(long, value_name = "JSON")]
    arguments: Option<String>,
    /// The tool's annotations as its server lists them, a JSON object.
    #[arg(long, value_name = "JSON")]
    annotations: Option<String>,
    /// The server the request goes to (with aggregation, the backend's name).
    #[arg(long, default_value = "")]
    server: String,
    /// The endpoint's path.
    #[arg(long, default_value = "/mcp")]
    endpoint: String,
    /// The client's name, as its handshake gives it.
    #[arg(long, default_value = "")]
    client: String,
    /// The client's protocol era: handshake or 2026-07-28.
    #[arg(long, default_value = "handshake", value_parser = ["handshake", "2026-07-28"])]
    era: String,

    #[command(flatten)]
    limits: LimitArgs,
}

/// The bounds a policy is loaded within (`crate::policy::Limits`).
#[derive(Debug, Args)]
pub struct LimitArgs {
    /// Bytes of one rule's condition.
    #[arg(long, value_name = "BYTES", default_value = "4096", value_parser = clap::value_parser!(u64).range(16..=65_536))]
    policy_max_expression: u64,
    /// Rules in one policy.
    #[arg(long, value_name = "N", default_value = "1000", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    policy_max_rules: u64,
    /// Parentheses, lists and maps open at once in one condition (the CEL parser and
    /// evaluator recurse per level).
    #[arg(long, value_name = "N", default_value = "16", value_parser = clap::value_parser!(u64).range(1..=32))]
    policy_max_nesting: u64,
    /// all/exists/exists_one/map/filter in one condition (nested ones multiply the work).
    #[arg(long, value_name = "N", default_value = "4", value_parser = clap::value_parser!(u64).range(0..=16))]
    policy_max_comprehensions: u64,
    /// Request shapes (server, method, tool and its annotations, client) whose verdicts a
    /// principal remembers for the rules that do not read `arguments`; 0: evaluate every
    /// rule on every request.
    #[arg(long, value_name = "N", default_value = "64", value_parser = clap::value_parser!(u64).range(0..=100_000))]
    policy_memo: u64,
    /// Values (list items and map entries) a request's arguments or a caller's claims may
    /// hold for the rules; a request past it is refused. What a rule may cost is reckoned
    /// with it.
    #[arg(long, value_name = "N", default_value = "1000", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    policy_max_items: u64,
    /// The most list items one rule's comprehensions may visit on one request in the worst
    /// case (nested ones multiply); a rule that could take more is refused at load.
    #[arg(long, value_name = "N", default_value = "100000", value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    policy_max_steps: u64,
}

impl LimitArgs {
    pub(super) fn limits(&self) -> Limits {
        Limits {
            max_expression: self.policy_max_expression as usize,
            max_rules: self.policy_max_rules as usize,
            max_nesting: self.policy_max_nesting as usize,
            max_comprehensions: self.policy_max_comprehensions as usize,
            memo_entries: self.policy_memo as usize,
            max_items: self.policy_max_items as usize,
            max_steps: self.policy_max_steps,
        }
    }
}

pub fn run(args: PolicyArgs) -> i32 {
    let PolicyCommand::Check(args) = args.command;
    match check(*args) {
        Ok((allowed, report)) => {
            print(&report);
            if allowed { 0 } else { 1 }
        }
        Err(message) => {
            report_usage_error(&message);
            EXIT_USAGE
        }
    }
}

/// The report is this command's output (it is not a protocol mode).
fn print(report: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(report.as_bytes())
        .and_then(|()| stdout.flush());
}

fn check(args: CheckArgs) -> Result<(bool, String), String> {
    let file = args.file.display().to_string();
    let text =
        std::fs::read_to_string(&args.file).map_err(|e| format!("cannot read {file}: {e}"))?;
    let specs = crate::policy::parse(&text).map_err(|e| format!("{file}: {e}"))?;
    let policy = Policy::new(specs, &args.limits.limits()).map_err(|e| format!("{file}: {e}"))?;
    let principal = match &args.principal {
        Some(path) => principal(path)?,
        None => Principal::default(),
    };
    let json = |raw: &Option<String>, flag: &str| -> Result<Option<Value>, String> {
        raw.as_deref()
            .map(|text| {
                serde_json::from_str::<Value>(text)
                    .ok()
                    .filter(Value::is_object)
                    .ok_or_else(|| {
                        format!("{flag} must be a JSON object, e.g. '{{\"path\": \"/tmp/a\"}}'")
                    })
            })
            .transpose()
    };
    let arguments = json(&args.arguments, "--arguments")?;
    let annotations = json(&args.annotations, "--annotations")?;
    let (method, target) = match (&args.call, &args.read, &args.prompt) {
        (Some(tool), _, _) => (
            if args.list {
                "tools/list"
            } else {
                "tools/call"
            },
            Target::Tool {
                name: tool,
                annotations: annotations.as_ref(),
            },
        ),
        (_, Some(uri), _) => (
            if args.list {
                "resources/list"
            } else {
                "resources/read"
            },
            Target::Resource { uri },
        ),
        (_, _, Some(name)) => (
            if args.list {
                "prompts/list"
            } else {
                "prompts/get"
            },
            Target::Prompt { name },
        ),
        _ => return Err("say what to check: --call TOOL, --read URI or --prompt NAME".into()),
    };
    let client = Client {
        name: args.client.clone(),
        version: String::new(),
        era: args.era.clone(),
    };
    let input = Input {
        principal: &principal,
        server: &args.server,
        endpoint: &args.endpoint,
        method,
        target,
        arguments: arguments.as_ref(),
        client: &client,
    };
    let (decision, steps) = policy.explain(&input, args.list);
    Ok(report(
        &file, &policy, &args, method, &principal, decision, &steps,
    ))
}

/// What `policy check` prints: the request, every rule's verdict, and the decision; and
/// whether it was allowed.
fn report(
    file: &str,
    policy: &Policy,
    args: &CheckArgs,
    method: &str,
    principal: &Principal,
    decision: Decision,
    steps: &[crate::policy::Step],
) -> (bool, String) {
    let mut report = format!("policy {file}: {} rules\n", policy.len());
    for warning in policy.warnings() {
        report.push_str(&format!("note: {warning}\n"));
    }
    report.push_str(&format!(
        "request: {method}, {:?}, on server {:?} at {}, as {}\n",
        args.call
            .as_deref()
            .or(args.read.as_deref())
            .or(args.prompt.as_deref())
            .unwrap_or(""),
        args.server,
        args.endpoint,
        principal
            .sub()
            .map_or("an anonymous caller".to_owned(), |s| format!("{s:?}")),
    ));
    for step in steps {
        let verdict = match &step.holds {
            Ok(true) => "holds".to_owned(),
            Ok(false) => "does not hold".to_owned(),
            Err(why) => format!("cannot be evaluated: {why}"),
        };
        report.push_str(&format!(
            "  {:<4} {:<7} {:<24} {verdict}\n",
            step.phase.as_str(),
            step.effect.as_str(),
            step.rule
        ));
    }
    let (allowed, line) = match decision {
        Decision::Allow => (true, "allowed".to_owned()),
        Decision::Hidden { rule } => (
            false,
            format!(
                "hidden (rule {rule:?}): the lists do not show it, and using it answers as if it did not exist"
            ),
        ),
        Decision::Refused { rule, why } => (false, format!("refused by rule {rule:?}: {why}")),
    };
    report.push_str(&format!("decision: {line}\n"));
    (allowed, report)
}

/// A principal file: the gateway's own shape, or a token's claims as they are.
fn principal(path: &std::path::Path) -> Result<Principal, String> {
    let shown = path.display();
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("--as: cannot read {shown}: {e}"))?;
    let value: Value = serde_json::from_str(&text)
        .ok()
        .filter(Value::is_object)
        .ok_or_else(|| format!("--as {shown}: not a JSON object; write {{\"sub\": \"ada\", \"claims\": {{…}}, \"scopes\": [\"mcp:tools\"], \"groups\": [\"staff\"]}}"))?;
    Ok(Principal::from_json(&value).expect("an object, checked above"))
}
