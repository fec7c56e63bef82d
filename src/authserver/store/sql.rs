//! The little SQL both databases are spoken to through: values, rows and a transaction
//! that runs one statement. The store's logic is written once over `Tx`; SQLite and
//! PostgreSQL each implement it. Placeholders are `$1`, `$2`, … in order of first use
//! (SQLite numbers `$N` parameters by first appearance, PostgreSQL by N: written in order,
//! they agree).

use std::error::Error as StdError;

use postgres::types::{IsNull, ToSql, Type, to_sql_checked};

/// One column value. Every column is TEXT or BIGINT (unix seconds, counters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Text(String),
    Int(i64),
    Null,
}

impl Value {
    pub fn text(&self) -> Option<&str> {
        match self {
            Value::Text(text) => Some(text),
            _ => None,
        }
    }

    pub fn int(&self) -> Option<i64> {
        match self {
            Value::Int(n) => Some(*n),
            _ => None,
        }
    }
}

impl From<&str> for Value {
    fn from(text: &str) -> Self {
        Value::Text(text.to_owned())
    }
}

impl From<String> for Value {
    fn from(text: String) -> Self {
        Value::Text(text)
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Self {
        Value::Int(n)
    }
}

impl From<Option<i64>> for Value {
    fn from(n: Option<i64>) -> Self {
        n.map_or(Value::Null, Value::Int)
    }
}

pub type Row = Vec<Value>;

/// Why a statement failed: the database's own message (it never contains a parameter
/// value: tokens are bound, never spliced into SQL).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SqlError(pub String);

/// A transaction: statements run in it, then it is committed by its owner.
pub trait Tx {
    /// Runs a statement; the number of rows it changed.
    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, SqlError>;
    /// Runs a query; its rows, each column in `SELECT` order.
    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>, SqlError>;

    /// Runs several statements without parameters (the schema).
    fn batch(&mut self, sql: &str) -> Result<(), SqlError>;

    fn query_one(&mut self, sql: &str, params: &[Value]) -> Result<Option<Row>, SqlError> {
        Ok(self.query(sql, params)?.into_iter().next())
    }
}

impl Tx for rusqlite::Transaction<'_> {
    fn batch(&mut self, sql: &str) -> Result<(), SqlError> {
        self.execute_batch(sql).map_err(sqlite_error)
    }

    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, SqlError> {
        let mut statement = self.prepare_cached(sql).map_err(sqlite_error)?;
        let changed = statement
            .execute(rusqlite::params_from_iter(params.iter()))
            .map_err(sqlite_error)?;
        Ok(changed as u64)
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>, SqlError> {
        let mut statement = self.prepare_cached(sql).map_err(sqlite_error)?;
        let columns = statement.column_count();
        let rows = statement
            .query_map(rusqlite::params_from_iter(params.iter()), |row| {
                (0..columns)
                    .map(|i| {
                        Ok(match row.get_ref(i)? {
                            rusqlite::types::ValueRef::Integer(n) => Value::Int(n),
                            rusqlite::types::ValueRef::Text(t) => {
                                Value::Text(String::from_utf8_lossy(t).into_owned())
                            }
                            _ => Value::Null,
                        })
                    })
                    .collect::<Result<Row, rusqlite::Error>>()
            })
            .map_err(sqlite_error)?;
        rows.collect::<Result<Vec<Row>, _>>().map_err(sqlite_error)
    }
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(match self {
            Value::Text(text) => ToSqlOutput::Borrowed(ValueRef::Text(text.as_bytes())),
            Value::Int(n) => ToSqlOutput::Borrowed(ValueRef::Integer(*n)),
            Value::Null => ToSqlOutput::Borrowed(ValueRef::Null),
        })
    }
}

fn sqlite_error(e: rusqlite::Error) -> SqlError {
    SqlError(format!("sqlite: {e}"))
}

impl Tx for postgres::Transaction<'_> {
    fn batch(&mut self, sql: &str) -> Result<(), SqlError> {
        self.batch_execute(sql).map_err(postgres_error)
    }

    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, SqlError> {
        let params: Vec<&(dyn ToSql + Sync)> = params.iter().map(|v| v as _).collect();
        postgres::Transaction::execute(self, sql, &params).map_err(postgres_error)
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>, SqlError> {
        let params: Vec<&(dyn ToSql + Sync)> = params.iter().map(|v| v as _).collect();
        let rows = postgres::Transaction::query(self, sql, &params).map_err(postgres_error)?;
        rows.iter()
            .map(|row| {
                (0..row.len())
                    .map(|i| {
                        let column = &row.columns()[i];
                        if *column.type_() == Type::INT8 {
                            row.try_get::<_, Option<i64>>(i).map(Value::from)
                        } else if *column.type_() == Type::INT4 {
                            row.try_get::<_, Option<i32>>(i)
                                .map(|n| Value::from(n.map(i64::from)))
                        } else {
                            row.try_get::<_, Option<String>>(i)
                                .map(|t| t.map_or(Value::Null, Value::Text))
                        }
                        .map_err(postgres_error)
                    })
                    .collect()
            })
            .collect()
    }
}

impl ToSql for Value {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        match self {
            Value::Text(text) => text.to_sql(ty, out),
            Value::Int(n) if *ty == Type::INT4 => i32::try_from(*n)?.to_sql(ty, out),
            Value::Int(n) => n.to_sql(ty, out),
            Value::Null => Ok(IsNull::Yes),
        }
    }

    fn accepts(ty: &Type) -> bool {
        <String as ToSql>::accepts(ty) || *ty == Type::INT8 || *ty == Type::INT4
    }

    to_sql_checked!();
}

pub fn postgres_error(e: postgres::Error) -> SqlError {
    // The server's own message (`db_error`) says what was wrong; the Display of the
    // client error alone is often just "db error".
    match e.as_db_error() {
        Some(db) => SqlError(format!("postgres: {}", db.message())),
        None => SqlError(format!("postgres: {e}")),
    }
}
