//! What one policy decision costs: `Policy::call` with ten rules of the kinds
//! `docs/policy.md` shows, on a request with arguments and annotations, timed over many
//! decisions (run by `scripts/bench/policy-cost`; figures in `docs/benchmarks.md`).

use std::time::Instant;

use mcp_stdio::policy::{
    Client, Decision, Effect, Input, Limits, Phase, Policy, Principal, RuleSpec, Target,
};
use serde_json::json;

fn rule(name: &str, phase: Phase, effect: Effect, when: &str) -> RuleSpec {
    RuleSpec::new(name, phase, effect, when)
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000);
    // As serve decides by default (the fixed rules' verdicts remembered per principal and
    // request shape), then with `--policy-memo 0` (every rule evaluated every time).
    for memo_entries in [Limits::default().memo_entries, 0] {
        measure(rounds, memo_entries);
    }
}

fn measure(rounds: usize, memo_entries: usize) {
    let started = Instant::now();
    let policy = Policy::new(
        vec![
            rule(
                "no-admin",
                Phase::List,
                Effect::Deny,
                "tool.name.startsWith('admin_') && !('admins' in principal.groups)",
            ),
            rule(
                "per-server",
                Phase::List,
                Effect::Allow,
                "server in principal.groups || 'admins' in principal.groups",
            ),
            rule(
                "readers",
                Phase::Call,
                Effect::Deny,
                "'readers' in principal.groups && !tool.annotations.readOnlyHint",
            ),
            rule(
                "ci",
                Phase::Call,
                Effect::Deny,
                "client.name == 'ci-agent' && tool.annotations.destructiveHint",
            ),
            rule(
                "contractors",
                Phase::Call,
                Effect::Deny,
                "has(principal.claims.kind) && principal.claims.kind == 'contractor'",
            ),
            rule(
                "regions",
                Phase::Call,
                Effect::Require,
                "!has(arguments.region) || arguments.region in ['eu-west-1', 'eu-central-1']",
            ),
            rule(
                "tmp",
                Phase::Call,
                Effect::Require,
                "!has(arguments.path) || arguments.path.startsWith('/tmp/')",
            ),
            rule(
                "scoped",
                Phase::Call,
                Effect::Require,
                "'mcp:tools' in principal.scopes",
            ),
            rule(
                "era",
                Phase::Call,
                Effect::Deny,
                "client.era == 'handshake' && method == 'completion/complete'",
            ),
            rule(
                "signed-in",
                Phase::Call,
                Effect::Allow,
                "principal.authenticated",
            ),
        ],
        &Limits {
            memo_entries,
            ..Limits::default()
        },
    )
    .expect("the rules compile");
    let compiled = started.elapsed();
    let principal = Principal::new(
        Some("ada".into()),
        json!({"kind": "employee", "email": "ada@example.com", "groups": ["files"]}),
        vec!["mcp:tools".into()],
        None,
        vec!["files".into()],
    );
    let client = Client {
        name: "claude-code".into(),
        version: "2.1".into(),
        era: "handshake".into(),
    };
    let annotations = json!({"readOnlyHint": false, "destructiveHint": false});
    let arguments = json!({"path": "/tmp/notes.txt", "region": "eu-west-1", "text": "hello"});
    let input = Input {
        principal: &principal,
        server: "files",
        endpoint: "/mcp",
        method: "tools/call",
        target: Target::Tool {
            name: "write_file",
            annotations: Some(&annotations),
        },
        arguments: Some(&arguments),
        client: &client,
    };
    assert_eq!(policy.call(&input), Decision::Allow);
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let one = Instant::now();
        let decision = policy.call(&input);
        times.push(one.elapsed().as_nanos() as u64);
        assert_eq!(decision, Decision::Allow);
    }
    times.sort_unstable();
    let at =
        |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)] as f64 / 1000.0;
    println!(
        "policy (--policy-memo {memo_entries}): 10 rules compiled in {:.1} ms; one call decision (list phase, then call phase) over {rounds}: p50 {:.1} µs, p90 {:.1} µs, p99 {:.1} µs",
        compiled.as_secs_f64() * 1000.0,
        at(0.5),
        at(0.9),
        at(0.99)
    );
}
