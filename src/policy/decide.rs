//! A policy's decision for one request, in one order for every phase: any `deny` rule that
//! holds refuses; every `require` rule must hold; then an `allow` rule must hold, since a
//! phase with rules refuses what none allows (a phase without rules allows everything). A
//! condition that cannot be evaluated (a claim of another type, a missing key) never
//! helps: it counts as a `deny` that holds, a `require` that fails, an `allow` that does
//! not. A call is first checked as the list phase would show its target: what a
//! principal cannot see, it cannot use either, and it is told the thing does not exist.
//! The verdicts of rules that cannot read `arguments` are remembered per principal and
//! request shape (`memo.rs`); only the others run on every call.

use std::collections::HashSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::input::Input;
use super::memo::{Holds, Verdicts};
use super::names::Reach;
use super::rule::{self, Effect, Limits, Phase, Rule, RuleSpec};

/// What the policy says about one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Not shown to this principal: answered as if it did not exist.
    Hidden {
        rule: String,
    },
    /// Refused by the call phase: the client is told which rule and why.
    Refused {
        rule: String,
        why: String,
    },
}

/// A set of compiled rules.
pub struct Policy {
    rules: Vec<Rule>,
    /// The standard library, built once; each decision adds its variables in a scope.
    root: cel::Context<'static, 'static>,
    /// The variables some rule can reach (`names.rs`): the only ones a decision adds.
    reachable: Reach,
    /// Per rule, whether it can read `arguments` (then it is evaluated on every call; the
    /// others' verdicts are remembered).
    per_call: Vec<bool>,
    /// The variables the rules that cannot read `arguments` reach, and those the others do.
    fixed_reachable: Reach,
    per_call_reachable: Reach,
    /// Request shapes remembered per principal (`Limits::memo_entries`; 0: none).
    memo_entries: usize,
    /// `Limits::max_items`: the values a request may bring for the rules.
    max_items: usize,
    /// This policy among those loaded in the process: a principal's memo made under
    /// another one is dropped.
    id: u64,
}

/// Where a decision's verdicts come from: the principal's memo for the rules that cannot
/// read `arguments`, and a scope to evaluate the others in (all of them without a memo).
struct Judge<'p> {
    fixed: Option<Verdicts>,
    scope: Option<cel::Context<'p, 'static>>,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("rules", &self.rules.len())
            .finish_non_exhaustive()
    }
}

/// One rule's verdict on a request, for an explanation.
#[derive(Debug, Clone)]
pub struct Step {
    pub rule: String,
    pub phase: Phase,
    pub effect: Effect,
    /// Whether its condition holds, or why it could not be evaluated.
    pub holds: Result<bool, String>,
}

/// Why a phase refused: the rule, and what to tell the client.
type Refusal = (String, String);

impl Policy {
    /// Compiles `specs` within `limits`; every problem is reported, each naming its rule.
    pub fn new(specs: Vec<RuleSpec>, limits: &Limits) -> Result<Policy, String> {
        if specs.len() > limits.max_rules {
            return Err(format!(
                "{} rules, more than --policy-max-rules ({})",
                specs.len(),
                limits.max_rules
            ));
        }
        let mut problems = Vec::new();
        let mut rules: Vec<Rule> = Vec::new();
        for spec in specs {
            if rules.iter().any(|r| r.name == spec.name) {
                problems.push(format!("rule {:?}: the name is used twice", spec.name));
                continue;
            }
            match rule::compile(spec, limits) {
                Ok(rule) => rules.push(rule),
                Err(why) => problems.push(why),
            }
        }
        if !problems.is_empty() {
            return Err(problems.join("; "));
        }
        let (mut reachable, mut fixed_reachable, mut per_call_reachable) =
            (HashSet::new(), HashSet::new(), HashSet::new());
        let mut per_call = Vec::with_capacity(rules.len());
        for rule in &rules {
            let mut names = HashSet::new();
            super::names::reachable(rule.program.expression(), &mut names);
            let reads_arguments = names.contains("arguments");
            per_call.push(reads_arguments);
            let into = if reads_arguments {
                &mut per_call_reachable
            } else {
                &mut fixed_reachable
            };
            into.extend(names.iter().cloned());
            reachable.extend(names);
        }
        Ok(Policy {
            rules,
            root: cel::Context::default(),
            reachable: Reach::new(reachable),
            per_call,
            fixed_reachable: Reach::new(fixed_reachable),
            per_call_reachable: Reach::new(per_call_reachable),
            memo_entries: limits.memo_entries,
            max_items: limits.max_items,
            id: next_id(),
        })
    }

    /// A policy without rules: everything allowed.
    pub fn open() -> Policy {
        Policy {
            rules: Vec::new(),
            root: cel::Context::default(),
            reachable: Reach::default(),
            per_call: Vec::new(),
            fixed_reachable: Reach::default(),
            per_call_reachable: Reach::default(),
            memo_entries: 0,
            max_items: usize::MAX,
            id: next_id(),
        }
    }

    /// What the operator should know about the rules as written: a phase with rules but
    /// no `allow` rule refuses everything.
    pub fn warnings(&self) -> Vec<String> {
        [(Phase::List, "list"), (Phase::Call, "call")]
            .into_iter()
            .filter(|(phase, _)| {
                let mut of_phase = self.rules.iter().filter(|r| r.phase == *phase).peekable();
                of_phase.peek().is_some() && !of_phase.any(|r| r.effect == Effect::Allow)
            })
            .map(|(_, name)| format!("the {name} phase has rules but no allow rule, so it refuses everything; add one, e.g. name = \"the-rest\", phase = \"{name}\", effect = \"allow\", when = \"true\""))
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether any rule of `phase` exists: a phase without rules allows everything, so
    /// a list need not be filtered at all.
    pub fn has(&self, phase: Phase) -> bool {
        self.rules.iter().any(|r| r.phase == phase)
    }

    /// Whether any rule reads a tool's annotations: only then does a call need its tool's
    /// annotations looked up before the decision.
    pub fn reads_annotations(&self) -> bool {
        self.rules.iter().any(|r| r.reads_annotations)
    }

    /// The variables a decision adds, sorted (for tests).
    #[cfg(test)]
    pub(super) fn reachable_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.reachable.names().map(String::as_str).collect();
        names.sort_unstable();
        names
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether a list shows the item `input` names to its principal.
    pub fn visible(&self, input: &Input<'_>) -> Decision {
        if self.rules.is_empty() {
            return Decision::Allow;
        }
        match self.judge(input) {
            Ok(judge) => self.visible_in(&judge),
            Err((rule, _)) => Decision::Hidden { rule },
        }
    }

    fn visible_in(&self, judge: &Judge<'_>) -> Decision {
        match self.phase(Phase::List, judge) {
            Ok(()) => Decision::Allow,
            Err((rule, _)) => Decision::Hidden { rule },
        }
    }

    /// Whether the principal may make the request `input` describes: hidden if the list
    /// phase would not show its target, refused if the call phase says no. The request's
    /// variables are made once for both phases.
    pub fn call(&self, input: &Input<'_>) -> Decision {
        if self.rules.is_empty() {
            return Decision::Allow;
        }
        let judge = match self.judge(input) {
            Ok(judge) => judge,
            Err((rule, why)) => return Decision::Refused { rule, why },
        };
        if let Decision::Hidden { rule } = self.visible_in(&judge) {
            return Decision::Hidden { rule };
        }
        match self.phase(Phase::Call, &judge) {
            Ok(()) => Decision::Allow,
            Err((rule, why)) => Decision::Refused { rule, why },
        }
    }

    /// Every rule's verdict on `input` (the list phase's, then the call phase's unless
    /// `list_only`), with the decision: what `policy check` shows.
    pub fn explain(&self, input: &Input<'_>, list_only: bool) -> (Decision, Vec<Step>) {
        let decision = if list_only {
            self.visible(input)
        } else {
            self.call(input)
        };
        let steps = match self.scope(input, &self.reachable) {
            Ok(scope) => self
                .rules
                .iter()
                .filter(|r| !list_only || r.phase == Phase::List)
                .map(|rule| Step {
                    rule: rule.name.clone(),
                    phase: rule.phase,
                    effect: rule.effect,
                    holds: holds(rule, &scope),
                })
                .collect(),
            Err(_) => Vec::new(),
        };
        (decision, steps)
    }

    fn phase(&self, phase: Phase, judge: &Judge<'_>) -> Result<(), Refusal> {
        let mut rules = self.rules.iter().filter(|r| r.phase == phase).peekable();
        if rules.peek().is_none() {
            return Ok(());
        }
        let of = |effect: Effect| {
            self.rules
                .iter()
                .enumerate()
                .filter(move |(_, r)| r.phase == phase && r.effect == effect)
        };
        let holds = |index: usize, rule: &Rule| judge.holds(index, rule);
        for (index, rule) in of(Effect::Deny) {
            match holds(index, rule) {
                Ok(false) => {}
                Ok(true) => return Err(refusal(rule, "it denies this")),
                Err(why) => {
                    return Err(unevaluated(rule, &why, "which counts as a denial"));
                }
            }
        }
        for (index, rule) in of(Effect::Require) {
            match holds(index, rule) {
                Ok(true) => {}
                Ok(false) => return Err(refusal(rule, "its requirement does not hold")),
                Err(why) => {
                    return Err(unevaluated(rule, &why, "so its requirement does not hold"));
                }
            }
        }
        if of(Effect::Allow).any(|(index, rule)| holds(index, rule) == Ok(true)) {
            return Ok(());
        }
        let phase = phase.as_str();
        Err((
            "default".into(),
            format!(
                "no allow rule of the {phase} phase holds for it, and a phase with rules refuses what none allows"
            ),
        ))
    }

    /// Where `input`'s verdicts come from. With a memo: the principal's remembered
    /// verdicts of the rules that cannot read `arguments` (evaluated now when this shape is
    /// new), and a scope for the others if there are any; without one (or for a shape too
    /// long to remember): a scope for every rule, evaluated as the phases need them.
    fn judge(&self, input: &Input<'_>) -> Result<Judge<'_>, Refusal> {
        let shape = match (self.memo_entries, input.shape()) {
            (1.., Some(shape)) => shape,
            _ => {
                return Ok(Judge {
                    fixed: None,
                    scope: Some(self.scope(input, &self.reachable)?),
                });
            }
        };
        let memo = input.principal.memo();
        let fixed = match memo.get(self.id, &shape) {
            Some(fixed) => fixed,
            None => {
                let fixed = self.fixed_verdicts(input)?;
                memo.put(self.id, self.memo_entries, &shape, fixed.clone());
                fixed
            }
        };
        let scope = if self.per_call.contains(&true) {
            Some(self.scope(input, &self.per_call_reachable)?)
        } else {
            None
        };
        Ok(Judge {
            fixed: Some(fixed),
            scope,
        })
    }

    /// Every rule's verdict on `input` but those of the rules that can read `arguments`.
    fn fixed_verdicts(&self, input: &Input<'_>) -> Result<Verdicts, Refusal> {
        let scope = self.scope(input, &self.fixed_reachable)?;
        Ok(self
            .rules
            .iter()
            .zip(&self.per_call)
            .map(|(rule, per_call)| (!per_call).then(|| holds(rule, &scope)))
            .collect::<Arc<[_]>>())
    }

    /// The root context with the request's variables named in `reachable`.
    fn scope(
        &self,
        input: &Input<'_>,
        reachable: &Reach,
    ) -> Result<cel::Context<'_, 'static>, Refusal> {
        let variables = input.variables(reachable, self.max_items).map_err(|why| {
            (
                "default".to_owned(),
                format!("the request could not be given to the policy: {why}"),
            )
        })?;
        let mut scope = self.root.new_inner_scope();
        for (name, value) in variables {
            scope.add_variable_from_value(name, value);
        }
        Ok(scope)
    }
}

impl Judge<'_> {
    /// Rule number `index`'s verdict: remembered, or evaluated now.
    fn holds(&self, index: usize, rule: &Rule) -> Holds {
        if let Some(Some(remembered)) = self.fixed.as_ref().map(|fixed| &fixed[index]) {
            return remembered.clone();
        }
        match &self.scope {
            Some(scope) => holds(rule, scope),
            // Unreachable: without a memo there is always a scope, and with one every rule
            // it does not hold a verdict for reads `arguments`, which the scope is made for.
            None => Err("the policy has no scope for this rule".to_owned()),
        }
    }
}

fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Whether `rule`'s condition holds; an error (or a panic in the evaluator) says why not.
fn holds(rule: &Rule, scope: &cel::Context<'_, '_>) -> Holds {
    let result = catch_unwind(AssertUnwindSafe(|| rule.program.execute(scope)))
        .map_err(|_| "the evaluator failed".to_owned())?;
    match result {
        Ok(cel::Value::Bool(value)) => Ok(value),
        Ok(other) => Err(format!("it gave {}, not true or false", kind(&other))),
        Err(e) => Err(e.to_string()),
    }
}

fn kind(value: &cel::Value) -> &'static str {
    match value {
        cel::Value::Null => "null",
        cel::Value::Int(_) | cel::Value::UInt(_) | cel::Value::Float(_) => "a number",
        cel::Value::String(_) => "a string",
        cel::Value::List(_) => "a list",
        cel::Value::Map(_) => "a map",
        _ => "a value",
    }
}

/// A rule that could not be evaluated refused: its own message would claim it held, so the
/// client (and the operator) is told what happened instead.
fn unevaluated(rule: &Rule, error: &str, so: &str) -> Refusal {
    (
        rule.name.clone(),
        format!(
            "the policy rule {:?} could not be evaluated for this request ({error}), {so}",
            rule.name
        ),
    )
}

fn refusal(rule: &Rule, why: &str) -> Refusal {
    let told = rule
        .message
        .clone()
        .unwrap_or_else(|| format!("the policy rule {:?} refused this: {why}", rule.name));
    (rule.name.clone(), told)
}
