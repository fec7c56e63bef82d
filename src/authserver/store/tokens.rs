//! Tokens of a grant: refresh rotation (once; a spent one revokes the grant), the access
//! check, and RFC 7009 revocation.

use super::{
    Grant, Issue, Redeemed, Revoked, SqlError, Store, groups_from, insert_tokens, live_grant, now,
    revoke_grant, text,
};

impl Store {
    /// Rotates a refresh token once: the old one is spent, a new pair issued. A spent one
    /// presented again revokes its grant.
    pub async fn rotate_refresh<E, C>(
        &self,
        refresh_hash: String,
        check: C,
        issue: Issue,
    ) -> Result<Redeemed<E>, SqlError>
    where
        E: Send + 'static,
        C: FnOnce(&Grant) -> Result<(), E> + Send + 'static,
    {
        self.transaction(move |tx| {
            let now = now();
            let taken = tx.query_one(
                "UPDATE tokens SET used_at = $1 WHERE token_hash = $2 AND kind = 'refresh' AND used_at IS NULL RETURNING grant_id, expires_at",
                &[now.into(), refresh_hash.clone().into()],
            )?;
            let Some(row) = taken else {
                let spent = tx.query_one(
                    "SELECT grant_id FROM tokens WHERE token_hash = $1 AND kind = 'refresh'",
                    &[refresh_hash.into()],
                )?;
                return match spent {
                    Some(row) => {
                        let grant_id = text(&row[0]);
                        revoke_grant(tx, &grant_id, now)?;
                        Ok(Redeemed::Replayed(Some(grant_id)))
                    }
                    None => Ok(Redeemed::Unknown),
                };
            };
            let grant_id = text(&row[0]);
            if row[1].int().unwrap_or(0) < now {
                return Ok(Redeemed::Expired);
            }
            let Some(grant) = live_grant(tx, &grant_id)? else {
                return Ok(Redeemed::Revoked);
            };
            if let Err(e) = check(&grant) {
                // Not this client's (or not this request's) token: nothing changes, so a
                // stolen refresh token tried elsewhere does not spend the owner's.
                tx.execute(
                    "UPDATE tokens SET used_at = NULL WHERE token_hash = $1",
                    &[refresh_hash.into()],
                )?;
                return Ok(Redeemed::Refused(e));
            }
            // One rotation's overlap: the access token issued just before stays valid (a
            // request may be in flight with it); older ones of this grant end now. So a
            // grant never has more than two live access tokens.
            let generation = tx
                .query_one(
                    "UPDATE grants SET generation = generation + 1, expires_at = $1 WHERE grant_id = $2 RETURNING generation",
                    &[issue.refresh_expires_at.into(), grant_id.clone().into()],
                )?
                .and_then(|row| row[0].int())
                .unwrap_or(0);
            tx.execute(
                "DELETE FROM tokens WHERE grant_id = $1 AND kind = 'access' AND generation < $2",
                &[grant_id.clone().into(), (generation - 1).into()],
            )?;
            insert_tokens(tx, &grant_id, &issue, now, generation)?;
            Ok(Redeemed::Issued(grant, Vec::new()))
        })
        .await
    }

    /// The grant behind a live access token.
    pub async fn access(&self, access_hash: String) -> Result<Option<(Grant, i64)>, SqlError> {
        self.transaction(move |tx| {
            let row = tx.query_one(
                "SELECT g.grant_id, g.client_id, g.principal, g.scope, g.resource, t.expires_at, g.groups FROM tokens t JOIN grants g ON g.grant_id = t.grant_id WHERE t.token_hash = $1 AND t.kind = 'access' AND t.expires_at > $2 AND g.revoked_at IS NULL",
                &[access_hash.into(), now().into()],
            )?;
            Ok(row.map(|row| {
                let grant = Grant {
                    grant_id: text(&row[0]),
                    client_id: text(&row[1]),
                    principal: text(&row[2]),
                    scope: text(&row[3]),
                    resource: text(&row[4]),
                    groups: groups_from(&row[6]),
                };
                (grant, row[5].int().unwrap_or(0))
            }))
        })
        .await
    }

    /// RFC 7009: a refresh token ends its grant; an access token ends itself. Only a
    /// token of `client_id` is revoked.
    pub async fn revoke(&self, token_hash: String, client_id: String) -> Result<Revoked, SqlError> {
        self.transaction(move |tx| {
            let now = now();
            let row = tx.query_one(
                "SELECT t.kind, t.grant_id FROM tokens t JOIN grants g ON g.grant_id = t.grant_id WHERE t.token_hash = $1 AND g.client_id = $2",
                &[token_hash.clone().into(), client_id.into()],
            )?;
            let Some(row) = row else { return Ok(Revoked::Nothing) };
            if row[0].text() == Some("refresh") {
                let grant_id = text(&row[1]);
                revoke_grant(tx, &grant_id, now)?;
                Ok(Revoked::Grant(grant_id))
            } else {
                tx.execute("DELETE FROM tokens WHERE token_hash = $1", &[token_hash.into()])?;
                Ok(Revoked::Access)
            }
        })
        .await
    }
}
