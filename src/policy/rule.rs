//! One rule: its name, phase, effect and CEL condition, checked at load against the bounds
//! (`Limits`) and the names a rule may use, and compiled once.

use serde::Deserialize;

/// When a rule is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// What a principal sees in `tools/list`, `prompts/list`, `resources/list` and
    /// `resources/templates/list`.
    List,
    /// What it may call, read, get, complete or subscribe to.
    Call,
}

/// What a rule's condition does when it holds (or, for `require`, when it does not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    Allow,
    Deny,
    Require,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::List => "list",
            Phase::Call => "call",
        }
    }
}

impl Effect {
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Allow => "allow",
            Effect::Deny => "deny",
            Effect::Require => "require",
        }
    }
}

/// A rule as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    pub name: String,
    pub phase: Phase,
    pub effect: Effect,
    /// The CEL condition.
    pub when: String,
    /// What a refused client is told (default: the rule's name and effect).
    pub message: Option<String>,
}

impl RuleSpec {
    /// A rule without a message of its own.
    pub fn new(name: &str, phase: Phase, effect: Effect, when: &str) -> Self {
        RuleSpec {
            name: name.into(),
            phase,
            effect,
            when: when.into(),
            message: None,
        }
    }
}

/// Bounds on what a policy may hold (`--policy-max-*`).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Bytes of one rule's condition.
    pub max_expression: usize,
    /// Rules in one policy.
    pub max_rules: usize,
    /// Brackets, parentheses and braces open at once in one condition (the CEL parser and
    /// evaluator recurse per level).
    pub max_nesting: usize,
    /// `all`, `exists`, `exists_one`, `map` and `filter` in one condition (each may visit
    /// every item of a list, and nested ones multiply).
    pub max_comprehensions: usize,
    /// Request shapes whose verdicts a principal remembers (`memo.rs`); 0: none.
    pub memo_entries: usize,
    /// Values (list items and map entries, at any depth) a request's `arguments` and a
    /// principal's claims, scopes and groups may hold for the rules; past it the request is
    /// refused, since the rules' cost is reckoned with it (`cost.rs`).
    pub max_items: usize,
    /// The most list items one condition's comprehensions may visit in the worst case
    /// (`cost.rs`); a rule that could take more is refused at load.
    pub max_steps: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_expression: 4096,
            max_rules: 1000,
            max_nesting: 16,
            max_comprehensions: 4,
            memo_entries: 64,
            max_items: 1000,
            max_steps: 100_000,
        }
    }
}

/// The variables a rule sees (`input.rs` fills every one of them).
pub const VARIABLES: [&str; 9] = [
    "principal",
    "server",
    "endpoint",
    "method",
    "tool",
    "arguments",
    "resource",
    "prompt",
    "client",
];

/// The functions a rule may call besides CEL's operators.
const FUNCTIONS: [&str; 16] = [
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "dyn",
    "type",
    "timestamp",
    "duration",
    "lowerAscii",
    "upperAscii",
];

/// CEL's list macros, as the error for an unknown function names them.
const COMPREHENSIONS: [&str; 6] = ["all", "exists", "exists_one", "existsOne", "map", "filter"];

/// A rule ready to be evaluated.
#[derive(Debug)]
pub struct Rule {
    pub name: String,
    pub phase: Phase,
    pub effect: Effect,
    pub message: Option<String>,
    pub program: cel::Program,
    /// The condition mentions `annotations` (the gateway then looks a called tool's up).
    pub reads_annotations: bool,
}

/// Checks `spec` against `limits` and the names a rule may use, and compiles it.
pub fn compile(spec: RuleSpec, limits: &Limits) -> Result<Rule, String> {
    let name = &spec.name;
    if name.is_empty()
        || name.len() > 64
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err(format!(
            "rule {name:?}: a name is 1 to 64 letters, digits, '-', '_' or '.'"
        ));
    }
    let source = spec.when.trim();
    if source.is_empty() {
        return Err(format!(
            "rule {name:?}: `when` is empty; write a condition, e.g. when = \"true\""
        ));
    }
    if source.len() > limits.max_expression {
        return Err(format!(
            "rule {name:?}: its condition is {} bytes, more than --policy-max-expression ({})",
            source.len(),
            limits.max_expression
        ));
    }
    let nesting = nesting(source);
    if nesting > limits.max_nesting {
        return Err(format!(
            "rule {name:?}: its condition nests {nesting} levels deep, more than --policy-max-nesting ({})",
            limits.max_nesting
        ));
    }
    let program = compile_on_a_large_stack(source.to_owned())
        .map_err(|why| format!("rule {name:?}: not a CEL expression: {why}"))?;
    let loops = super::cost::loop_variables(program.expression());
    if loops.len() > limits.max_comprehensions {
        return Err(format!(
            "rule {name:?}: {} of all/exists/exists_one/map/filter, more than --policy-max-comprehensions ({})",
            loops.len(),
            limits.max_comprehensions
        ));
    }
    let steps = super::cost::worst_steps(program.expression(), limits.max_items as u64);
    if steps > limits.max_steps {
        return Err(format!(
            "rule {name:?}: it may visit {steps} list items on one request (its list macros, `in` and `+` on lists; a list from the request or the token counts as --policy-max-items, {}, long, and a macro inside another multiplies), more than --policy-max-steps ({}); nest fewer, use a list written in the rule, or lower --policy-max-items",
            limits.max_items, limits.max_steps
        ));
    }
    let references = program.references();
    for variable in references.variables() {
        if !VARIABLES.contains(&variable) && !loops.contains(&variable) {
            return Err(format!(
                "rule {name:?}: unknown variable `{variable}`; a rule sees {}",
                VARIABLES.join(", ")
            ));
        }
    }
    for function in references.functions() {
        let operator = function.starts_with(['_', '@', '!']);
        if !operator && !FUNCTIONS.contains(&function) {
            return Err(format!(
                "rule {name:?}: unknown function `{function}`; a rule may call {} (and the macros has, {})",
                FUNCTIONS.join(", "),
                COMPREHENSIONS.join(", ")
            ));
        }
    }
    Ok(Rule {
        name: spec.name,
        phase: spec.phase,
        effect: spec.effect,
        message: spec.message,
        program,
        reads_annotations: source.contains("annotations"),
    })
}

/// The CEL parser recurses deeply per level (some 20 frames each): it runs on a thread
/// with room for it, not on the caller's.
fn compile_on_a_large_stack(source: String) -> Result<cel::Program, String> {
    std::thread::Builder::new()
        .name("policy-compile".into())
        .stack_size(32 << 20)
        .spawn(move || cel::Program::compile(&source).map_err(|e| e.to_string()))
        .map_err(|e| format!("cannot start the compiler thread: {e}"))?
        .join()
        .map_err(|_| "the CEL parser failed on it".to_owned())?
}

/// The deepest nesting of `(`, `[` and `{` outside string literals.
fn nesting(source: &str) -> usize {
    let (mut depth, mut deepest, mut quote, mut escaped) = (0usize, 0usize, None, false);
    for c in source.chars() {
        if let Some(q) = quote {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                _ if c == q => quote = None,
                _ => {}
            }
            continue;
        }
        match c {
            '"' | '\'' => quote = Some(c),
            '(' | '[' | '{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}
