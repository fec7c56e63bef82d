//! The SQL policy (`sandbox::sql::policy::check`): never panics; what it allows carries a
//! limit of at most the cap (asking one row more only when the cap bounds it), and the SQL that would run is a fixed point (checking it
//! again gives the same SQL and limit), has no comments left, and is one statement.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_stdio::sandbox::sql::policy;

fuzz_target!(|input: &[u8]| {
    let Some((&cap, sql)) = input.split_first() else { return };
    let Ok(sql) = std::str::from_utf8(sql) else { return };
    let max = 1 + cap as u64;
    if let Ok(checked) = policy::check(sql, max) {
        assert!(checked.limit <= max, "{sql:?}: limit {} over {max}", checked.limit);
        assert_eq!(policy::check(&checked.sql, max).as_ref(), Ok(&checked), "{sql:?} is not a fixed point");
        if !checked.sql.contains(['\'', '"', '$']) {
            assert!(!checked.sql.contains("--") && !checked.sql.contains("/*"), "{sql:?} kept a comment: {}", checked.sql);
        }
        assert!(checked.fetched() <= max + 1 && checked.fetched() >= checked.limit, "{sql:?}");
        assert!(checked.sql.contains(&format!("LIMIT {}", checked.fetched())), "{}", checked.sql);
    }
});
