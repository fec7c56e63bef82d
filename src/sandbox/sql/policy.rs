//! The SQL policy: a query is parsed with sqlparser's PostgreSQL dialect and allowed only if
//! it is exactly one statement, a query at the root (SELECT, a set operation, VALUES,
//! TABLE), with nothing in its whole tree that writes (a DML statement in a CTE,
//! `SELECT … INTO`), locks rows (`FOR UPDATE/SHARE`), takes a bind parameter, or calls a
//! function whose effect outlives a rolled-back read-only transaction, reads the server's
//! files, or runs SQL from a string. The outer limit becomes `min(literal, max_rows)`, asked
//! one row further when the cap is what bounds it (so the tool can tell whether the cap
//! withheld rows); the SQL that runs is regenerated from the checked tree (comments gone) and
//! checked again.
//! A filter, not a boundary: the read-only transaction and the role are the boundary.

use std::ops::ControlFlow;

use sqlparser::ast::{
    Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, LimitClause, ObjectName,
    ObjectNamePart, Query, SetExpr, Statement, Value, Visit, VisitMut, Visitor, VisitorMut,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

/// A query the policy allows, as it will run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// Regenerated from the checked tree, with the limit applied.
    pub sql: String,
    /// At most this many rows are returned (at most `max_rows`).
    pub limit: u64,
    /// Whether `max_rows` (not the query's own limit) bounds the rows: the SQL then asks for
    /// `limit + 1` rows, and a row past `limit` means the cap withheld rows.
    pub capped: bool,
}

impl Checked {
    /// The LIMIT the SQL that runs carries.
    pub fn fetched(&self) -> u64 {
        self.limit.saturating_add(u64::from(self.capped))
    }
}

/// Why a query is refused: the kind decides the problem code, the text says what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// It parses, but the policy forbids what it does (`MCP_QUERY_VIOLATION`).
    Violation(String),
    /// It is not SQL this policy can read (`MCP_VALIDATION_ERROR`).
    Invalid(String),
}

/// Checks `sql` and returns what will run, with at most `max_rows` rows.
pub fn check(sql: &str, max_rows: u64) -> Result<Checked, Refusal> {
    let first = check_once(sql, max_rows)?;
    // What runs is the regenerated text: it must pass on its own, unchanged.
    let second = check_once(&first.sql, max_rows)?;
    if second != first {
        return Err(Refusal::Invalid(
            "the query does not survive being rewritten unchanged; simplify it".into(),
        ));
    }
    Ok(first)
}

fn check_once(sql: &str, max_rows: u64) -> Result<Checked, Refusal> {
    no_comment_in_an_operator(sql)?;
    let mut statements = Parser::parse_sql(&PostgreSqlDialect {}, sql)
        .map_err(|e| Refusal::Invalid(format!("the query does not parse as PostgreSQL: {e}")))?;
    let mut statement = match statements.len() {
        1 => statements.remove(0),
        0 => {
            return Err(Refusal::Invalid(
                "the query is empty; send one SELECT".into(),
            ));
        }
        n => {
            return Err(Refusal::Violation(format!(
                "the query holds {n} statements; send exactly one SELECT"
            )));
        }
    };
    let Statement::Query(query) = &mut statement else {
        return Err(Refusal::Violation(format!(
            "only a query (SELECT, or a set operation of SELECTs) may run, not {}",
            statement_kind(&statement)
        )));
    };
    if let ControlFlow::Break(refusal) = (**query).visit(&mut Walk) {
        return Err(refusal);
    }
    let _ = VisitMut::visit(&mut **query, &mut DropHints);
    let (limit, capped) = apply_limit(query, max_rows);
    Ok(Checked {
        sql: statement.to_string(),
        limit,
        capped,
    })
}

/// sqlparser reads `~|--x` as one custom operator; PostgreSQL ends an operator name where
/// `--` or `/*` begins and reads the rest as a comment, so what it runs would lose the
/// rest of the line, the LIMIT this policy appends included (found by the `sql_policy`
/// fuzz target; WORKAROUNDS 48). Such an operator is refused.
fn no_comment_in_an_operator(sql: &str) -> Result<(), Refusal> {
    use sqlparser::tokenizer::{Token, Tokenizer};
    // A text that does not tokenize does not parse either; the parser says why.
    let Ok(tokens) = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize() else {
        return Ok(());
    };
    for token in tokens {
        if let Token::CustomBinaryOperator(operator) = token
            && (operator.contains("--") || operator.contains("/*"))
        {
            return Err(Refusal::Violation(format!(
                "the operator {operator} holds -- or /*, which PostgreSQL reads as the start of a comment; put spaces between operators"
            )));
        }
    }
    Ok(())
}

/// The first words of a statement, for the refusal.
fn statement_kind(statement: &Statement) -> String {
    let text = statement.to_string();
    let words: Vec<&str> = text.split_whitespace().take(2).collect();
    words.join(" ")
}

/// The outer limit made `min(literal, max_rows)`; a missing, non-literal, `ALL`, `PERCENT`
/// or `WITH TIES` limit becomes `max_rows`. `FETCH FIRST n ROWS ONLY` becomes a `LIMIT`.
/// Returns the rows to return at most, and whether the cap (not the query) bounds them, in
/// which case the SQL asks for one row more. `LIMIT max_rows + 1` read back gives the same
/// answer, so the regenerated SQL is a fixed point.
fn apply_limit(query: &mut Query, max_rows: u64) -> (u64, bool) {
    let literal = |expr: &Expr| match expr {
        Expr::Value(v) => match &v.value {
            Value::Number(n, false) => n.parse::<u64>().ok(),
            _ => None,
        },
        _ => None,
    };
    let asked = match (&query.limit_clause, &query.fetch) {
        (Some(LimitClause::LimitOffset { limit: Some(e), .. }), None) => literal(e),
        // `OFFSET n ROWS FETCH FIRST m ROWS ONLY` parses as an offset-only limit clause.
        (None | Some(LimitClause::LimitOffset { limit: None, .. }), Some(fetch))
            if !fetch.with_ties && !fetch.percent =>
        {
            fetch.quantity.as_ref().map_or(Some(1), literal)
        }
        _ => None,
    };
    // At `u64::MAX` no row can be past the cap, and `LIMIT u64::MAX + 1` cannot be written.
    let (limit, capped) = match asked {
        Some(n) if n <= max_rows => (n, false),
        _ => (max_rows, max_rows < u64::MAX),
    };
    let fetched = limit.saturating_add(u64::from(capped));
    let offset = match query.limit_clause.take() {
        Some(LimitClause::LimitOffset { offset, .. }) => offset,
        Some(LimitClause::OffsetCommaLimit { offset, .. }) => Some(sqlparser::ast::Offset {
            value: offset,
            rows: sqlparser::ast::OffsetRows::None,
        }),
        None => None,
    };
    query.fetch = None;
    query.limit_clause = Some(LimitClause::LimitOffset {
        limit: Some(Expr::Value(
            Value::Number(fetched.to_string(), false).with_empty_span(),
        )),
        offset,
        limit_by: Vec::new(),
    });
    (limit, capped)
}

/// Optimizer hints (`SELECT --+ …`, `SELECT /*+ … */`) are comments to PostgreSQL, but
/// sqlparser keeps them and prints them back; the SQL that runs carries no comment.
struct DropHints;

impl VisitorMut for DropHints {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        fn drop_hints(body: &mut SetExpr) {
            match body {
                SetExpr::Select(select) => select.optimizer_hints.clear(),
                SetExpr::SetOperation { left, right, .. } => {
                    drop_hints(left);
                    drop_hints(right);
                }
                SetExpr::Query(query) => drop_hints(&mut query.body),
                _ => {}
            }
        }
        drop_hints(&mut query.body);
        ControlFlow::Continue(())
    }
}

/// The walk over the whole tree: every query, statement, value, relation and expression.
struct Walk;

impl Visitor for Walk {
    type Break = Refusal;

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<Refusal> {
        if !query.locks.is_empty() {
            return violation("row locks (FOR UPDATE / FOR SHARE) are not allowed: remove them");
        }
        if query.for_clause.is_some() || query.settings.is_some() || query.format_clause.is_some() {
            return violation("this clause is not PostgreSQL; remove it");
        }
        if !query.pipe_operators.is_empty() {
            return violation("pipe operators are not PostgreSQL; remove them");
        }
        readable(&query.body)
    }

    fn pre_visit_statement(&mut self, statement: &Statement) -> ControlFlow<Refusal> {
        match statement {
            Statement::Query(_) => ControlFlow::Continue(()),
            other => violation(&format!(
                "only reading is allowed: {} cannot run, not even inside a query",
                statement_kind(other)
            )),
        }
    }

    fn pre_visit_value(&mut self, value: &sqlparser::ast::ValueWithSpan) -> ControlFlow<Refusal> {
        match &value.value {
            Value::Placeholder(p) => violation(&format!(
                "bind parameters ({p}) are not allowed: write the value into the query as a literal"
            )),
            _ => ControlFlow::Continue(()),
        }
    }

    fn pre_visit_relation(&mut self, relation: &ObjectName) -> ControlFlow<Refusal> {
        // A table function in FROM (`FROM pg_sleep(5)`) is a relation with arguments.
        match last_name(relation) {
            Some(name) if denied_function(&name) => denied(&name),
            _ => ControlFlow::Continue(()),
        }
    }

    fn pre_visit_table_factor(
        &mut self,
        factor: &sqlparser::ast::TableFactor,
    ) -> ControlFlow<Refusal> {
        match factor {
            // `LATERAL f(...)`: a function whose name is not visited as an expression.
            sqlparser::ast::TableFactor::Function { name, .. } => match last_name(name) {
                Some(name) if !denied_function(&name) => ControlFlow::Continue(()),
                Some(name) => denied(&name),
                None => violation("a function with a computed name is not allowed"),
            },
            _ => ControlFlow::Continue(()),
        }
    }

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<Refusal> {
        let Expr::Function(function) = expr else {
            return ControlFlow::Continue(());
        };
        let Some(name) = last_name(&function.name) else {
            return violation("a function with a computed name is not allowed");
        };
        if denied_function(&name) {
            return denied(&name);
        }
        if name == "current_setting" && !harmless_setting(function) {
            return violation(
                "current_setting may read only a literal, non-sensitive setting (not file locations, connection strings, or commands)",
            );
        }
        ControlFlow::Continue(())
    }
}

fn violation(why: &str) -> ControlFlow<Refusal> {
    ControlFlow::Break(Refusal::Violation(why.to_owned()))
}

fn denied(name: &str) -> ControlFlow<Refusal> {
    violation(&format!(
        "the function {name} is not allowed: its effect outlives a read-only transaction, it reads the server's files, or it runs SQL from a string"
    ))
}

/// What a query's body may be: a SELECT (without INTO), a set operation, VALUES, TABLE, or
/// a parenthesized query. The DML a CTE can hold is refused here.
fn readable(body: &SetExpr) -> ControlFlow<Refusal> {
    match body {
        SetExpr::Select(select) if select.into.is_some() => {
            violation("SELECT … INTO creates a table: remove INTO")
        }
        SetExpr::Select(_) | SetExpr::Query(_) | SetExpr::Values(_) | SetExpr::Table(_) => {
            ControlFlow::Continue(())
        }
        SetExpr::SetOperation { left, right, .. } => {
            readable(left)?;
            readable(right)
        }
        SetExpr::Insert(_) | SetExpr::Update(_) | SetExpr::Delete(_) | SetExpr::Merge(_) => {
            violation(
                "only reading is allowed: a write (INSERT, UPDATE, DELETE, MERGE) cannot run, not even in a WITH clause",
            )
        }
    }
}

/// The object's own name (the last part), lower-cased: `pg_catalog."PG_SLEEP"` is
/// `pg_sleep`. Quoted names are folded too, so a spelling never slips through.
fn last_name(name: &ObjectName) -> Option<String> {
    match name.0.last()? {
        ObjectNamePart::Identifier(ident) => Some(ident.value.to_lowercase()),
        ObjectNamePart::Function(_) => None,
    }
}

/// Functions refused by name, or by a prefix that names a family.
fn denied_function(name: &str) -> bool {
    const EXACT: &[&str] = &[
        "pg_read_file",
        "pg_read_binary_file",
        "pg_stat_file",
        "pg_terminate_backend",
        "pg_cancel_backend",
        "set_config",
        "pg_notify",
        "pg_reload_conf",
        "pg_rotate_logfile",
        "pg_switch_wal",
        "pg_switch_xlog",
        "pg_promote",
        "pg_create_restore_point",
        "pg_backup_start",
        "pg_backup_stop",
        "pg_start_backup",
        "pg_stop_backup",
        "pg_log_backend_memory_contexts",
        "pg_import_system_collations",
        "pg_current_logfile",
        "nextval",
        "setval",
        "txid_current",
        "pg_current_xact_id",
        "query_to_xml",
        "query_to_xmlschema",
        "query_to_xml_and_xmlschema",
        "cursor_to_xml",
        "cursor_to_xmlschema",
        "pg_get_wal_replay_pause_state",
        "make_lo",
    ];
    const PREFIXES: &[&str] = &[
        "dblink",
        "lo_",
        "pg_advisory",
        "pg_try_advisory",
        "pg_sleep",
        "pg_ls_",
        "pg_file_",
        "pg_replication_",
        "pg_create_logical_replication_slot",
        "pg_create_physical_replication_slot",
        "pg_drop_replication_slot",
        "pg_copy_",
        "pg_logical_",
        "pg_wal_replay_",
        "pg_stat_reset",
        "pg_xact_commit_timestamp",
    ];
    EXACT.contains(&name) || PREFIXES.iter().any(|p| name.starts_with(p))
}

/// `current_setting('name')` with a literal name that says nothing about the server's
/// files, connections or commands.
fn harmless_setting(function: &Function) -> bool {
    const SENSITIVE: &[&str] = &[
        "data_directory",
        "config_file",
        "hba_file",
        "ident_file",
        "external_pid_file",
        "log_directory",
        "archive_command",
        "archive_library",
        "restore_command",
        "archive_cleanup_command",
        "recovery_end_command",
        "primary_conninfo",
        "primary_slot_name",
        "shared_preload_libraries",
        "session_preload_libraries",
        "local_preload_libraries",
        "dynamic_library_path",
        "krb_server_keyfile",
        "unix_socket_directories",
        "promote_trigger_file",
        "stats_temp_directory",
    ];
    let FunctionArguments::List(list) = &function.args else {
        return false;
    };
    let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(first)))) = list.args.first()
    else {
        return false;
    };
    let Value::SingleQuotedString(setting) = &first.value else {
        return false;
    };
    let setting = setting.to_lowercase();
    !(SENSITIVE.contains(&setting.as_str())
        || setting.starts_with("ssl_")
        || setting.ends_with("_file")
        || setting.ends_with("_command")
        || setting.ends_with("_conninfo"))
}

#[cfg(test)]
mod tests;
