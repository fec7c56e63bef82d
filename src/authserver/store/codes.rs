//! Authorization codes: stored (bounded), and redeemed once in the transaction that makes
//! the grant; a second redemption revokes it.

use super::{
    Code, Grant, Issue, Redeemed, SqlError, Store, count, evict_grants, groups_from, groups_text,
    insert_tokens, new_grant_id, now, now_us, revoke_grant, text,
};

impl Store {
    /// Stores a new code (by hash). `Ok(false)`: too many codes wait to be redeemed.
    pub async fn add_code(&self, code_hash: String, code: Code) -> Result<bool, SqlError> {
        let max = self.limits.max_pending_codes as i64;
        self.transaction(move |tx| {
            let now = now();
            tx.execute(
                "DELETE FROM codes WHERE used_at IS NULL AND expires_at < $1",
                &[now.into()],
            )?;
            let pending = count(
                tx,
                "SELECT COUNT(*) FROM codes WHERE used_at IS NULL",
                &[],
            )?;
            if pending >= max {
                return Ok(false);
            }
            tx.execute(
                "INSERT INTO codes (code_hash, client_id, principal, scope, resource, redirect_uri, code_challenge, expires_at, groups) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                &[
                    code_hash.into(),
                    code.client_id.into(),
                    code.principal.into(),
                    code.scope.into(),
                    code.resource.into(),
                    code.redirect_uri.into(),
                    code.code_challenge.into(),
                    code.expires_at.into(),
                    groups_text(&code.groups).into(),
                ],
            )?;
            Ok(true)
        })
        .await
    }

    /// Redeems a code once. The code is spent whatever `check` says (a wrong verifier
    /// burns it); a second redemption revokes the grant the first one made.
    pub async fn redeem_code<E, C>(
        &self,
        code_hash: String,
        check: C,
        issue: Issue,
    ) -> Result<Redeemed<E>, SqlError>
    where
        E: Send + 'static,
        C: FnOnce(&Code) -> Result<(), E> + Send + 'static,
    {
        let max_grants = self.limits.max_grants as i64;
        self.transaction(move |tx| {
            let now = now();
            let taken = tx.query_one(
                "UPDATE codes SET used_at = $1 WHERE code_hash = $2 AND used_at IS NULL RETURNING client_id, principal, scope, resource, redirect_uri, code_challenge, expires_at, groups",
                &[now.into(), code_hash.clone().into()],
            )?;
            let Some(row) = taken else {
                let spent = tx.query_one("SELECT grant_id FROM codes WHERE code_hash = $1", &[code_hash.into()])?;
                return match spent {
                    Some(row) => {
                        let grant_id = row[0].text().map(str::to_owned);
                        if let Some(grant_id) = &grant_id {
                            revoke_grant(tx, grant_id, now)?;
                        }
                        Ok(Redeemed::Replayed(grant_id))
                    }
                    None => Ok(Redeemed::Unknown),
                };
            };
            let code = Code {
                client_id: text(&row[0]),
                principal: text(&row[1]),
                scope: text(&row[2]),
                resource: text(&row[3]),
                redirect_uri: text(&row[4]),
                code_challenge: text(&row[5]),
                expires_at: row[6].int().unwrap_or(0),
                groups: groups_from(&row[7]),
            };
            if code.expires_at < now {
                return Ok(Redeemed::Expired);
            }
            if let Err(e) = check(&code) {
                return Ok(Redeemed::Refused(e));
            }
            let grant = Grant {
                grant_id: new_grant_id(),
                client_id: code.client_id,
                principal: code.principal,
                scope: code.scope,
                resource: code.resource,
                groups: code.groups,
            };
            tx.execute(
                "INSERT INTO grants (grant_id, client_id, principal, scope, resource, created_us, expires_at, groups) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                &[
                    grant.grant_id.clone().into(),
                    grant.client_id.clone().into(),
                    grant.principal.clone().into(),
                    grant.scope.clone().into(),
                    grant.resource.clone().into(),
                    now_us().into(),
                    issue.refresh_expires_at.into(),
                    groups_text(&grant.groups).into(),
                ],
            )?;
            tx.execute("UPDATE codes SET grant_id = $1 WHERE code_hash = $2", &[grant.grant_id.clone().into(), code_hash.into()])?;
            insert_tokens(tx, &grant.grant_id, &issue, now, 0)?;
            let evicted = evict_grants(tx, max_grants, now)?;
            Ok(Redeemed::Issued(grant, evicted))
        })
        .await
    }
}
