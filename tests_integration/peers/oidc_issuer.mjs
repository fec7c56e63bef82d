// A real OpenID Provider (the npm package oidc-provider, OpenID Certified) as the identity
// provider in front of `serve --oauth-issuer`: two pre-registered confidential clients
// ("alice" and "bob") get JWT access tokens for the resource argv[2] through the client
// credentials grant (resource indicators, scope mcp:tools), and a third resource
// ("http://elsewhere.example/mcp") exists to mint tokens with the wrong audience.
// Prints the provider's port.
import http from "node:http";
import Provider from "oidc-provider";

const resource = process.argv[2];
const elsewhere = "http://elsewhere.example/mcp";
const server = http.createServer();
const port = await new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server.address().port)));
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
  clients: [client("alice"), client("bob")],
  features: {
    clientCredentials: { enabled: true },
    devInteractions: { enabled: false },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, indicator) => {
        if (indicator !== resource && indicator !== elsewhere) throw new Error(`unknown resource ${indicator}`);
        return { scope: "mcp:tools", audience: indicator, accessTokenFormat: "jwt", accessTokenTTL: 300 };
      },
    },
  },
  scopes: ["mcp:tools"],
});

server.on("request", provider.callback());
console.log(`${port}`);
