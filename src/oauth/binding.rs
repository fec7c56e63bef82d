//! Whether a login binds its tokens to a DPoP key (`--dpop always|auto|never`, RFC 9449),
//! and what a login's answer says about the binding: a key is made per login, kept with
//! the grant when the server issued a DPoP token, and dropped when it issued a Bearer one.

use super::challenge::Challenge;
use super::discovery::Discovered;
use super::dpop::{DpopKey, DpopMode};
use super::flow::ServerAuth;
use super::token::TokenAnswer;

/// The one signing algorithm our proofs use.
const ALGORITHM: &str = "ES256";

impl ServerAuth {
    /// A new key for this login when it is to be DPoP-bound, else `None`.
    pub(super) fn login_key(
        &self,
        found: &Discovered,
        challenge: Option<&Challenge>,
    ) -> Result<Option<DpopKey>, String> {
        let algs = &found.server.dpop_algs;
        let offered = algs.iter().any(|a| a == ALGORITHM);
        let server_says_dpop = challenge.is_some_and(|c| c.dpop);
        // A server that challenges with Bearer alone takes Bearer tokens only (RFC 9449
        // §7.1: one that takes both names both): binding because its authorization server
        // can would lock us out (oidc-provider advertises DPoP by default, in front of
        // servers that know only Bearer; WORKAROUNDS #59).
        let bearer_only = challenge.is_some_and(|c| c.bearer && !c.dpop);
        let wanted = match self.settings.dpop {
            DpopMode::Never => false,
            DpopMode::Always => {
                if !offered && !algs.is_empty() {
                    return Err(format!(
                        "--dpop always: the authorization server {} takes DPoP proofs only in {} and mcp-stdio signs ES256; use --dpop auto",
                        found.server.issuer,
                        algs.join(", ")
                    ));
                }
                true
            }
            DpopMode::Auto => {
                if !offered && !algs.is_empty() && server_says_dpop {
                    tracing::warn!(
                        algorithms = ?algs,
                        "the authorization server takes DPoP proofs only in algorithms mcp-stdio does not sign with (it signs ES256); using Bearer tokens"
                    );
                }
                if offered && bearer_only {
                    tracing::debug!(
                        "the authorization server offers DPoP, but the server challenges with Bearer only; using Bearer tokens (--dpop always binds anyway)"
                    );
                }
                (server_says_dpop && (offered || algs.is_empty())) || (offered && !bearer_only)
            }
        };
        wanted.then(DpopKey::generate).transpose()
    }

    /// The stored form of `key` if the answer's token is bound to it. A server that does
    /// not do DPoP answers a proof with a Bearer token (RFC 9449 §5): that token is used
    /// as one, unless `--dpop always` asked for binding.
    pub(super) fn binding_of(
        &self,
        answer: &TokenAnswer,
        key: Option<&DpopKey>,
    ) -> Result<Option<crate::secret::Secret>, String> {
        let Some(key) = key else {
            return Ok(None);
        };
        let bound = answer
            .token_type
            .as_deref()
            .is_some_and(|t| t.eq_ignore_ascii_case("dpop"));
        if bound {
            return key.to_stored().map(Some);
        }
        if self.settings.dpop == DpopMode::Always {
            return Err(
                "the authorization server issued a Bearer token where --dpop always asks for a DPoP-bound one; use --dpop auto to accept Bearer tokens from it".into(),
            );
        }
        tracing::info!(
            "the authorization server issued a Bearer token to a DPoP proof; using it as a Bearer token"
        );
        Ok(None)
    }
}
