//! What the store forgets by itself: expired tokens and codes, revoked and lapsed grants.

use super::{SqlError, Store, count, now};

impl Store {
    /// Forgets what can no longer matter: expired tokens and codes, and grants that are
    /// revoked or past their refresh lifetime (with their tokens and codes).
    pub async fn collect_garbage(&self) -> Result<(), SqlError> {
        self.transaction(move |tx| {
            let now = now();
            tx.execute("DELETE FROM tokens WHERE expires_at < $1", &[now.into()])?;
            tx.execute("DELETE FROM grants WHERE revoked_at IS NOT NULL OR expires_at < $1", &[now.into()])?;
            tx.execute("DELETE FROM tokens WHERE grant_id NOT IN (SELECT grant_id FROM grants)", &[])?;
            tx.execute(
                "DELETE FROM codes WHERE expires_at < $1 AND (grant_id IS NULL OR grant_id NOT IN (SELECT grant_id FROM grants))",
                &[now.into()],
            )?;
            Ok(())
        })
        .await
    }

    /// Live grants (the store tests count them).
    pub async fn live_grants(&self) -> Result<i64, SqlError> {
        self.transaction(|tx| {
            count(
                tx,
                "SELECT COUNT(*) FROM grants WHERE revoked_at IS NULL",
                &[],
            )
        })
        .await
    }
}
