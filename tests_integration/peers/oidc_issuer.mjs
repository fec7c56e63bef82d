// A real OpenID Provider (the npm package oidc-provider, OpenID Certified) as the identity
// provider in front of `serve --oauth-issuer`: two pre-registered confidential clients
// ("alice" and "bob") get JWT access tokens for the resource argv[2] through the client
// credentials grant (resource indicators, scope mcp:tools); "carol"'s tokens live one second;
// a second resource ("http://elsewhere.example/mcp") exists to mint tokens with the wrong
// audience. Its RS256 signing key is made at start with a fresh key id, so starting it again
// on the same port (argv[3]) is a key rotation. Prints the provider's port.
import http from "node:http";
import { exportJWK, generateKeyPair } from "jose";
import Provider from "oidc-provider";

const resource = process.argv[2];
const elsewhere = "http://elsewhere.example/mcp";
const server = http.createServer();
const port = await new Promise((resolve) => server.listen(Number(process.argv[3] ?? 0), "127.0.0.1", () => resolve(server.address().port)));
const { privateKey } = await generateKeyPair("RS256", { extractable: true });
const signing = { ...(await exportJWK(privateKey)), kid: `key-${Date.now()}`, alg: "RS256", use: "sig" };
const issuer = `http://127.0.0.1:${port}`;

const client = (id) => ({
  client_id: id,
  client_secret: `${id}-secret-${"x".repeat(32)}`,
  grant_types: ["client_credentials"],
  redirect_uris: [],
  response_types: [],
  token_endpoint_auth_method: "client_secret_basic",
});

const provider = new Provider(issuer, {
  clients: [client("alice"), client("bob"), client("carol")],
  jwks: { keys: [signing] },
  features: {
    clientCredentials: { enabled: true },
    devInteractions: { enabled: false },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, indicator) => {
        if (indicator !== resource && indicator !== elsewhere) throw new Error(`unknown resource ${indicator}`);
        const ttl = ctx.oidc.client?.clientId === "carol" ? 1 : 300;
        return { scope: "mcp:tools", audience: indicator, accessTokenFormat: "jwt", accessTokenTTL: ttl, jwt: { sign: { alg: "RS256" } } };
      },
    },
  },
  scopes: ["mcp:tools"],
});

server.on("request", provider.callback());
console.log(`${port}`);
