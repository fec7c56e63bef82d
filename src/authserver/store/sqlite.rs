//! The default store: one SQLite file (write-ahead log, full sync), private to the user
//! who runs serve. Statements run on the blocking pool, one transaction at a time (SQLite
//! has a single writer anyway).

use std::path::Path;
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, TransactionBehavior};

use super::sql::{SqlError, Tx};

#[derive(Clone)]
pub struct Sqlite {
    connection: Arc<Mutex<Connection>>,
}

impl Sqlite {
    /// Opens (creating it and its folder, both private) and migrates the file.
    pub fn open(path: &Path) -> Result<Self, SqlError> {
        if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            create_private_dir(folder)?;
        }
        let connection = Connection::open(path)
            .map_err(|e| SqlError(format!("cannot open {}: {e}", path.display())))?;
        restrict_to_owner(path)?;
        connection
            .execute_batch(
                "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA busy_timeout = 5000;",
            )
            .map_err(|e| SqlError(format!("cannot set up {}: {e}", path.display())))?;
        let store = Sqlite {
            connection: Arc::new(Mutex::new(connection)),
        };
        store.transaction_blocking(|tx| super::migrations::apply(tx).map(|_| ()))?;
        Ok(store)
    }

    /// Runs `work` in one transaction (committed when it returns `Ok`).
    pub async fn transaction<R, F>(&self, work: F) -> Result<R, SqlError>
    where
        R: Send + 'static,
        F: FnOnce(&mut dyn Tx) -> Result<R, SqlError> + Send + 'static,
    {
        let store = self.clone();
        tokio::task::spawn_blocking(move || store.transaction_blocking(work))
            .await
            .map_err(|e| SqlError(format!("the store's worker failed: {e}")))?
    }

    fn transaction_blocking<R>(
        &self,
        work: impl FnOnce(&mut dyn Tx) -> Result<R, SqlError>,
    ) -> Result<R, SqlError> {
        let mut connection = self
            .connection
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // IMMEDIATE: the write lock is taken at BEGIN, so two serve processes sharing the
        // file never interleave a read-then-write.
        let mut tx = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| SqlError(format!("sqlite: {e}")))?;
        let result = work(&mut tx)?;
        tx.commit().map_err(|e| SqlError(format!("sqlite: {e}")))?;
        Ok(result)
    }
}

fn create_private_dir(folder: &Path) -> Result<(), SqlError> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(folder)
        .map_err(|e| SqlError(format!("cannot create {}: {e}", folder.display())))
}

fn restrict_to_owner(path: &Path) -> Result<(), SqlError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| SqlError(format!("cannot make {} private: {e}", path.display())))?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}
