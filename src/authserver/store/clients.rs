//! Registered clients: recorded, looked up, an idle one recycled at `--oauth-max-clients`,
//! and the grants of metadata-document clients that left the allowlist ended.

use super::{SqlError, Store, count, now, now_us, text};

impl Store {
    /// Records a registered client (its metadata as JSON). At `max_clients`, the oldest
    /// client with no live grant and no pending code makes room; when every client has one,
    /// `Ok(false)`: a flood of registrations can never end a signed-in user's grant.
    pub async fn register_client(
        &self,
        client_id: String,
        metadata: String,
    ) -> Result<bool, SqlError> {
        let max = self.limits.max_clients as i64;
        self.transaction(move |tx| {
            let now = now();
            let count = count(tx, "SELECT COUNT(*) FROM clients", &[])?;
            if count >= max {
                let idle = tx.query(
                    "SELECT c.client_id FROM clients c WHERE NOT EXISTS (SELECT 1 FROM grants g WHERE g.client_id = c.client_id AND g.revoked_at IS NULL AND g.expires_at >= $1) AND NOT EXISTS (SELECT 1 FROM codes k WHERE k.client_id = c.client_id AND k.used_at IS NULL AND k.expires_at >= $1) ORDER BY c.created_us, c.client_id LIMIT $2",
                    &[now.into(), (count - max + 1).into()],
                )?;
                if (idle.len() as i64) < count - max + 1 {
                    return Ok(false);
                }
                for row in idle {
                    tx.execute("DELETE FROM clients WHERE client_id = $1", &[row[0].clone()])?;
                }
            }
            tx.execute(
                "INSERT INTO clients (client_id, metadata, created_us) VALUES ($1, $2, $3)",
                &[client_id.into(), metadata.into(), now_us().into()],
            )?;
            Ok(true)
        })
        .await
    }

    /// A registered client's metadata.
    pub async fn client(&self, client_id: String) -> Result<Option<String>, SqlError> {
        self.transaction(move |tx| {
            Ok(tx
                .query_one(
                    "SELECT metadata FROM clients WHERE client_id = $1",
                    &[client_id.into()],
                )?
                .and_then(|row| row[0].text().map(str::to_owned)))
        })
        .await
    }

    /// Revokes the grants and drops the codes of metadata-document clients (ids that are
    /// https URLs) not in `allowed`; how many clients that was.
    pub async fn end_document_clients_except(
        &self,
        allowed: Vec<String>,
    ) -> Result<usize, SqlError> {
        self.transaction(move |tx| {
            let now = now();
            let rows = tx.query(
                "SELECT DISTINCT client_id FROM grants WHERE revoked_at IS NULL AND client_id LIKE 'https://%' UNION SELECT DISTINCT client_id FROM codes WHERE used_at IS NULL AND client_id LIKE 'https://%'",
                &[],
            )?;
            let mut ended = 0;
            for row in rows {
                let id = text(&row[0]);
                if allowed.contains(&id) {
                    continue;
                }
                tx.execute(
                    "UPDATE grants SET revoked_at = $1 WHERE client_id = $2 AND revoked_at IS NULL",
                    &[now.into(), id.clone().into()],
                )?;
                tx.execute("DELETE FROM tokens WHERE kind = 'access' AND grant_id IN (SELECT grant_id FROM grants WHERE client_id = $1)", &[id.clone().into()])?;
                tx.execute("DELETE FROM codes WHERE client_id = $1 AND used_at IS NULL", &[id.into()])?;
                ended += 1;
            }
            Ok(ended)
        })
        .await
    }
}
