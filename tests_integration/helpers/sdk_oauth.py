"""The Python SDK's own OAuth client (mcp 2.3.0's `OAuthClientProvider`) signing in at
serve's embedded authorization server: tokens kept in memory, and the user's browser played
by `consent_until` (the consent page, Allow, the redirect to the client's callback)."""

import urllib.parse

import anyio
from clients.browser import consent_until
from helpers.processes import free_port


class Memory:
    """The SDK's token storage, in memory."""

    def __init__(self):
        self.tokens = self.client = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, client):
        self.client = client


def sdk_oauth(url: str, client_name: str = "python sdk"):
    """An `httpx` client that signs in at `url`'s authorization server as the SDK does, and
    the storage that ends up holding its tokens."""
    from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
    from mcp.shared._httpx_utils import create_mcp_http_client
    from mcp.shared.auth import OAuthClientMetadata

    callback = f"http://127.0.0.1:{free_port()}/callback"
    reached = {}

    async def redirect_handler(authorization_url: str) -> None:
        reached["url"] = await anyio.to_thread.run_sync(consent_until, authorization_url, callback)

    async def callback_handler() -> AuthorizationCodeResult:
        query = urllib.parse.parse_qs(urllib.parse.urlparse(reached["url"]).query)
        return AuthorizationCodeResult(code=query["code"][0], state=query.get("state", [None])[0])

    storage = Memory()
    provider = OAuthClientProvider(url, OAuthClientMetadata(redirect_uris=[callback], client_name=client_name), storage,
                                   redirect_handler=redirect_handler, callback_handler=callback_handler)
    return create_mcp_http_client(auth=provider), storage
