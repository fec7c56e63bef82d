//! The sandbox's tools: definitions (schemas, annotations) and the code behind them. Nothing
//! here knows JSON-RPC: a tool takes checked arguments and a context, and gives an output
//! or a refusal that says what would work.

mod files;
mod git;
mod listing;
mod metrics;
mod search;
mod sql;

pub use sql::Sql;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde_json::{Value, json};

use super::problem::Problem;
use super::workspace::{Refusal, Workspace};

/// The bounds every tool works within.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_read_bytes: u64,
    pub max_matches: usize,
    pub max_files: usize,
    pub max_entries: usize,
    pub max_hash_bytes: u64,
}

/// What a call may use: the workspace, the bounds, and the signals to stop.
pub struct Context<'a> {
    pub workspace: &'a Workspace,
    pub limits: &'a Limits,
    pub cancelled: &'a AtomicBool,
    pub deadline: Instant,
    /// `git rev-parse HEAD` of the root, when it is a repository.
    pub revision: Option<&'a str>,
    /// `read_only_sql`'s database, when one is configured.
    pub sql: Option<&'a Sql>,
}

impl Context<'_> {
    /// Whether the work must stop (cancelled, or past the per-call deadline).
    pub fn stop(&self) -> Option<Failure> {
        if self.cancelled.load(Ordering::Relaxed) {
            return Some(Failure::new(
                Problem::Cancelled,
                "the call was cancelled",
                "nothing to do",
            ));
        }
        if Instant::now() >= self.deadline {
            return Some(Failure::new(
                Problem::Timeout,
                "the call ran out of time (--call-timeout)",
                "narrow it: a smaller path, a more specific glob, fewer lines",
            ));
        }
        None
    }
}

/// A tool's answer: the text for the content block and the structured result. `untrusted`
/// names the source when the text is workspace content (it is then fenced and assessed).
pub struct Output {
    pub text: String,
    pub structured: Value,
    pub untrusted: Option<String>,
}

/// A refusal: what kind of problem, what happened, what would work, and which arguments
/// were at fault.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub problem: Problem,
    pub message: String,
    pub remedy: String,
    pub invalid_params: Vec<String>,
}

impl Failure {
    pub fn new(problem: Problem, message: impl Into<String>, remedy: impl Into<String>) -> Self {
        Failure {
            problem,
            message: message.into(),
            remedy: remedy.into(),
            invalid_params: Vec::new(),
        }
    }

    /// Names the argument at fault.
    pub fn on(mut self, argument: &str) -> Self {
        self.invalid_params.push(argument.to_owned());
        self
    }

    /// A path the workspace would not open (always the `path` argument).
    pub fn refused(refusal: &Refusal, workspace: &Workspace) -> Self {
        let problem = match refusal {
            Refusal::Outside(_) | Refusal::Denied { .. } | Refusal::NoAccess(_) => {
                Problem::AccessDenied
            }
            Refusal::NotFound(_) => Problem::NotFound,
            Refusal::NotRegular { .. } | Refusal::NotDirectory(_) | Refusal::Invalid(_) => {
                Problem::Validation
            }
        };
        Failure::new(problem, refusal.message(), refusal.remedy(&workspace.name)).on("path")
    }
}

pub type ToolResult = Result<Output, Failure>;

/// One tool as `tools/list` shows it.
pub struct Tool {
    pub name: &'static str,
    pub description: &'static str,
    pub input: Value,
    pub output: Value,
}

impl Tool {
    pub fn definition(&self) -> Value {
        json!({
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input,
            "outputSchema": self.output,
            "annotations": {
                "readOnlyHint": true,
                "destructiveHint": false,
                "idempotentHint": true,
                "openWorldHint": false,
            },
        })
    }
}

/// Every tool, in the deterministic order `tools/list` pages through; `read_only_sql` last,
/// and only with a database.
pub fn all(with_sql: bool) -> Vec<Tool> {
    let mut tools = workspace_tools();
    if with_sql {
        tools.push(Tool {
            name: "read_only_sql",
            description: "Run one read-only SQL query (PostgreSQL) against the configured database. One SELECT, no bind parameters; the row count is capped. Rows come back as JSON with their column types, fenced as untrusted content, with a receipt of the SQL that ran.",
            input: json!({"type": "object", "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 100000, "description": "One SELECT (or UNION/INTERSECT/EXCEPT of SELECTs), literals only"},
                "max_rows": {"type": "integer", "minimum": 1, "description": "At most this many rows (capped by the server)"}
            }, "required": ["query"], "additionalProperties": false}),
            output: json!({"type": "object", "properties": {"columns": {"type": "array"}, "rows": {"type": "array"}, "row_count": {"type": "integer"}, "truncated": {"type": "boolean"}, "receipt": {"type": "object"}}, "required": ["columns", "rows", "truncated", "receipt"]}),
        });
    }
    tools
}

fn workspace_tools() -> Vec<Tool> {
    let path = json!({"type": "string", "description": "A path relative to the workspace root", "maxLength": 4096});
    let receipt = json!({"type": "object", "description": "path, sha256 of the bytes read, truncation and the git revision"});
    let object = |properties: Value, required: Value| json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false});
    vec![
        Tool {
            name: "read_file",
            description: "Read a text file in the workspace, optionally a line range or byte range. Returned byte-identical (secrets redacted), fenced as untrusted content, with a receipt.",
            input: object(
                json!({
                    "path": path,
                    "start_line": {"type": "integer", "minimum": 1, "description": "First line to return (1-based)"},
                    "end_line": {"type": "integer", "minimum": 1, "description": "Last line to return"},
                    "offset": {"type": "integer", "minimum": 0, "description": "Byte offset to start at (continue a truncated read)"},
                    "max_bytes": {"type": "integer", "minimum": 1, "description": "At most this many bytes (capped by the server)"}
                }),
                json!(["path"]),
            ),
            output: json!({"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}, "receipt": receipt}, "required": ["path", "content", "receipt"]}),
        },
        Tool {
            name: "list_directory",
            description: "List a directory of the workspace, recursively to a depth, optionally filtered by a glob.",
            input: object(
                json!({
                    "path": {"type": "string", "description": "A directory relative to the root ('.' for the root)", "maxLength": 4096},
                    "depth": {"type": "integer", "minimum": 1, "maximum": 10, "description": "How deep to recurse (1: this directory only)"},
                    "glob": {"type": "string", "maxLength": 256, "description": "Only entries whose relative path matches, e.g. '**/*.rs'"}
                }),
                json!([]),
            ),
            output: json!({"type": "object", "properties": {"entries": {"type": "array"}, "truncated": {"type": "boolean"}}, "required": ["entries", "truncated"]}),
        },
        Tool {
            name: "search_text",
            description: "Search files for a regular expression (or a literal) with context lines. Linear-time regex engine: no pattern can backtrack catastrophically.",
            input: object(
                json!({
                    "pattern": {"type": "string", "minLength": 1, "maxLength": 1024},
                    "literal": {"type": "boolean", "description": "Treat the pattern as plain text"},
                    "path": {"type": "string", "maxLength": 4096, "description": "Directory or file to search (default: the root)"},
                    "glob": {"type": "string", "maxLength": 256, "description": "Only files whose relative path matches"},
                    "context": {"type": "integer", "minimum": 0, "maximum": 10, "description": "Lines of context around each match"},
                    "case_insensitive": {"type": "boolean"}
                }),
                json!(["pattern"]),
            ),
            output: json!({"type": "object", "properties": {"matches": {"type": "array"}, "files_searched": {"type": "integer"}, "truncated": {"type": "boolean"}}, "required": ["matches", "truncated"]}),
        },
        Tool {
            name: "file_info",
            description: "Type, size, modification time and sha256 of a path in the workspace.",
            input: object(json!({"path": path}), json!(["path"])),
            output: json!({"type": "object", "properties": {"path": {"type": "string"}, "type": {"type": "string"}, "size": {"type": "integer"}, "modified": {"type": "integer"}, "sha256": {"type": "string"}}, "required": ["path", "type"]}),
        },
        Tool {
            name: "git_log",
            description: "Recent commits of the workspace's git repository (read-only, no network).",
            input: object(
                json!({
                    "max_count": {"type": "integer", "minimum": 1, "maximum": 200},
                    "path": {"type": "string", "maxLength": 4096, "description": "Only commits touching this path"}
                }),
                json!([]),
            ),
            output: json!({"type": "object", "properties": {"commits": {"type": "array"}, "truncated": {"type": "boolean"}}, "required": ["commits"]}),
        },
        Tool {
            name: "git_diff",
            description: "The diff of the working tree (or the index with staged, or against a revision). Read-only; denylisted files are left out.",
            input: object(
                json!({
                    "revision": {"type": "string", "maxLength": 128, "description": "Compare with this revision (e.g. HEAD~1)"},
                    "staged": {"type": "boolean"},
                    "path": {"type": "string", "maxLength": 4096}
                }),
                json!([]),
            ),
            output: json!({"type": "object", "properties": {"diff": {"type": "string"}, "truncated": {"type": "boolean"}}, "required": ["diff", "truncated"]}),
        },
        Tool {
            name: "system_metrics",
            description: "CPU, memory and load of this machine, and the disk space of the workspace's filesystem.",
            input: object(json!({}), json!([])),
            output: json!({"type": "object", "properties": {"cpu_percent": {"type": "number"}, "memory": {"type": "object"}, "load": {"type": "array"}, "disk": {"type": "object"}}, "required": ["memory", "disk"]}),
        },
    ]
}

/// Runs tool `name` with `arguments` (already validated against its schema).
pub fn call(name: &str, arguments: &Value, context: &Context<'_>) -> ToolResult {
    match name {
        "read_file" => files::read_file(arguments, context),
        "file_info" => files::file_info(arguments, context),
        "list_directory" => listing::list_directory(arguments, context),
        "search_text" => search::search_text(arguments, context),
        "git_log" => git::git_log(arguments, context),
        "git_diff" => git::git_diff(arguments, context),
        "system_metrics" => metrics::system_metrics(context),
        "read_only_sql" => sql::read_only_sql(arguments, context),
        other => Err(Failure::new(
            Problem::Validation,
            format!("no tool named '{other}'"),
            "call tools/list",
        )
        .on("name")),
    }
}

/// sha256 of `bytes`, in hex.
pub fn sha256(bytes: &[u8]) -> String {
    hex(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes).as_ref())
}

pub fn hex(bytes: &[u8]) -> String {
    ::hex::encode(bytes)
}

/// A string argument.
pub fn string_arg<'a>(arguments: &'a Value, name: &str) -> Option<&'a str> {
    arguments.get(name).and_then(Value::as_str)
}

pub fn u64_arg(arguments: &Value, name: &str) -> Option<u64> {
    arguments.get(name).and_then(Value::as_u64)
}

pub fn bool_arg(arguments: &Value, name: &str) -> bool {
    arguments
        .get(name)
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// A glob argument, compiled.
pub fn glob_arg(arguments: &Value) -> Result<Option<globset::GlobMatcher>, Failure> {
    string_arg(arguments, "glob")
        .map(|glob| {
            globset::GlobBuilder::new(glob)
                .literal_separator(true)
                .build()
                .map(|g| g.compile_matcher())
                .map_err(|e| {
                    Failure::new(
                        Problem::Validation,
                        format!("the glob '{glob}' is invalid ({e})"),
                        "use a glob like '**/*.rs' or 'src/*.txt'",
                    )
                    .on("glob")
                })
        })
        .transpose()
}
