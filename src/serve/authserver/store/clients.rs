//! Registered clients: recorded, looked up, recycled past `--oauth-max-clients`, and the
//! grants of metadata-document clients that left the allowlist ended.

use super::{SqlError, Store, count, now, now_us, text};

impl Store {
    /// Records a registered client (its metadata as JSON). Past `max_clients`, the oldest
    /// are forgotten and their grants revoked.
    pub async fn register_client(
        &self,
        client_id: String,
        metadata: String,
    ) -> Result<(), SqlError> {
        let max = self.limits.max_clients as i64;
        self.transaction(move |tx| {
            let now = now();
            tx.execute(
                "INSERT INTO clients (client_id, metadata, created_us) VALUES ($1, $2, $3)",
                &[client_id.into(), metadata.into(), now_us().into()],
            )?;
            let count = count(tx, "SELECT COUNT(*) FROM clients", &[])?;
            if count > max {
                let oldest = tx.query(
                    "SELECT client_id FROM clients ORDER BY created_us, client_id LIMIT $1",
                    &[(count - max).into()],
                )?;
                for row in oldest {
                    let id = row[0].clone();
                    tx.execute("UPDATE grants SET revoked_at = $1 WHERE client_id = $2 AND revoked_at IS NULL", &[now.into(), id.clone()])?;
                    tx.execute("DELETE FROM clients WHERE client_id = $1", &[id])?;
                }
            }
            Ok(())
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
