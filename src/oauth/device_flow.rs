//! The device login (`--oauth-device`) for one server: the code on stderr, then polling.

use tokio::time::Instant;

use super::challenge::Challenge;
use super::device::{self, DeviceAnswer, Poll, next_interval, poll_error, poll_form, request_form};
use super::discovery::discover;
use super::flow::ServerAuth;
use super::registration::still_valid;
use super::store::Grant;
use super::token::{TokenFailure, answer_of, unix_now};
use crate::logging::notice;

impl ServerAuth {
    /// Runs the device flow and stores the grant.
    pub(super) async fn login_device(
        &self,
        challenge: Option<&Challenge>,
    ) -> Result<Grant, String> {
        let found = discover(&self.http, &self.server, challenge).await?;
        let endpoint = device::endpoint(found.server.device_authorization_endpoint.as_ref())?;
        let scope = self.scope(&found, challenge);
        let key = self.login_key(&found, challenge)?;
        let client = self.device_client(&found, scope.as_deref()).await?;
        let resource = self.resource_for(&found);
        let fetched = self
            .authenticated_post(
                endpoint,
                request_form(&client.client_id, scope.as_deref(), resource.as_deref()),
                &client,
                &found.server.issuer,
                None,
            )
            .await?;
        if !fetched.status.is_success() {
            return Err(format!(
                "the device authorization endpoint refused the request (HTTP {})",
                fetched.status
            ));
        }
        let answer = DeviceAnswer::parse(&fetched.body)?;
        notice(&answer.instructions());
        let deadline = Instant::now() + answer.deadline(self.settings.timeout);
        let mut interval = answer.interval();
        loop {
            tokio::time::sleep(interval).await;
            if Instant::now() > deadline {
                return Err(format!(
                    "the device login was not approved within {} s (--oauth-timeout, or the code's lifetime)",
                    answer.deadline(self.settings.timeout).as_secs()
                ));
            }
            let form = poll_form(&answer.device_code, &client.client_id, resource.as_deref());
            let proof = self.token_proof(key.as_ref(), &found.server.token_endpoint)?;
            let fetched = match self
                .authenticated_post(
                    &found.server.token_endpoint,
                    form,
                    &client,
                    &found.server.issuer,
                    proof.as_ref(),
                )
                .await
            {
                Ok(fetched) => fetched,
                Err(e) => {
                    tracing::debug!("polling the token endpoint failed ({e}); trying again");
                    continue;
                }
            };
            // A DPoP nonce asked for is carried by the next poll, which comes anyway.
            if key.is_some() && self.note_as_nonce(&fetched) {
                continue;
            }
            if fetched.status.is_success() {
                let token = answer_of(&fetched).map_err(TokenFailure::into_message)?;
                return self.keep_login(
                    token,
                    &found,
                    &client.client_id,
                    scope.as_deref(),
                    "a device code",
                    key.as_ref(),
                );
            }
            let error = serde_json::from_slice::<serde_json::Value>(&fetched.body)
                .ok()
                .and_then(|v| v["error"].as_str().map(str::to_owned));
            let poll = poll_error(error.as_deref());
            if let Poll::Failed(message) = poll {
                return Err(message);
            }
            interval = next_interval(interval, &poll);
        }
    }

    /// The client for a device login: the one given with --client-id, the registration
    /// kept for this issuer, or a new one (no redirect URI).
    async fn device_client(
        &self,
        found: &super::discovery::Discovered,
        scope: Option<&str>,
    ) -> Result<super::store::Registration, String> {
        if let Some(client_id) = &self.settings.client_id {
            return Ok(self.configured_client(client_id, Some(found)));
        }
        let document = self.store.load()?;
        match document
            .registrations
            .get(&found.server.issuer)
            .filter(|r| still_valid(r, unix_now()))
        {
            Some(cached) => Ok(cached.clone()),
            None => self.register_and_keep(found, None, scope).await,
        }
    }
}
