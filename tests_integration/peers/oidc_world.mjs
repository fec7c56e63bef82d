// A real OpenID Provider (the npm package oidc-provider, OpenID Certified) with Dynamic Client
// Registration, PKCE (S256 required), resource indicators (JWT access tokens for the MCP
// server), refresh-token rotation, revocation and RFC 9207 `iss`; plus a protected MCP
// endpoint that accepts only its JWTs. Logins are approved without a user (the interaction
// routes finish at once). Prints "<provider port> <mcp port>" and logs grants to argv[2].
// With argv[3], tokens are for that resource instead (another MCP server, e.g. `serve
// --oauth-issuer`), and the endpoint here is unused.
import http from "node:http";
import fs from "node:fs";
import Provider from "oidc-provider";
import { createRemoteJWKSet, jwtVerify } from "jose";

const log = (line) => fs.appendFileSync(process.argv[2], line + "\n");
const listen = (server) => new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server.address().port)));

const mcpServer = http.createServer();
const mcpPort = await listen(mcpServer);
const mcpUrl = process.argv[3] ?? `http://127.0.0.1:${mcpPort}/mcp`;

const opServer = http.createServer();
const opPort = await listen(opServer);
const issuer = `http://127.0.0.1:${opPort}`;

const provider = new Provider(issuer, {
  features: {
    registration: { enabled: true },
    revocation: { enabled: true },
    devInteractions: { enabled: false },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => mcpUrl,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => {
        if (resource !== mcpUrl) throw new Error(`unknown resource ${resource}`);
        return { scope: "mcp:tools", audience: mcpUrl, accessTokenFormat: "jwt", accessTokenTTL: 2 };
      },
    },
  },
  pkce: { required: () => true },
  scopes: ["openid", "offline_access", "mcp:tools"],
  rotateRefreshToken: true,
  issueRefreshToken: () => true,
  findAccount: (ctx, id) => ({ accountId: id, claims: () => ({ sub: id }) }),
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
});

const approve = async (req, res) => {
  const details = await provider.interactionDetails(req, res);
  log(`interaction ${details.prompt.name} ${JSON.stringify(details.prompt.reasons)}`);
  if (details.prompt.name === "login") {
    return provider.interactionFinished(req, res, { login: { accountId: "user-1" } }, { mergeWithLastSubmission: false });
  }
  // Approve exactly what the prompt says is missing (the provider's documented pattern).
  const missing = details.prompt.details;
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(" "));
  for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
    grant.addResourceScope(indicator, scopes.join(" "));
  }
  const grantId = await grant.save();
  return provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
};

provider.on("grant.success", (ctx) => log(`grant ${ctx.oidc.params.grant_type}`));
provider.on("registration_create.success", () => log("registered"));
provider.on("grant.revoked", () => log("revoked"));
provider.on("server_error", (ctx, err) => log(`server_error ${err}`));
provider.on("grant.error", (ctx, err) => log(`grant_error ${err} ${err.error_description ?? ""}`));
provider.on("authorization.error", (ctx, err) => log(`authorization_error ${err} ${err.error_description ?? ""}`));
provider.on("registration_create.error", (ctx, err) => log(`registration_error ${err} ${err.error_description ?? ""}`));

const callback = provider.callback();
opServer.on("request", (req, res) => {
  if (req.url.startsWith("/interaction/")) {
    approve(req, res).catch((err) => { log(`interaction_error ${err}`); res.writeHead(500).end(); });
    return;
  }
  callback(req, res);
});

const jwks = createRemoteJWKSet(new URL(`${issuer}/jwks`));
const prm = `http://127.0.0.1:${mcpPort}/.well-known/oauth-protected-resource/mcp`;
mcpServer.on("request", (req, res) => {
  if (req.method === "GET" && req.url === "/.well-known/oauth-protected-resource/mcp") {
    res.writeHead(200, { "content-type": "application/json" });
    return res.end(JSON.stringify({ resource: mcpUrl, authorization_servers: [issuer], scopes_supported: ["mcp:tools"] }));
  }
  if (req.url !== "/mcp") return res.writeHead(404).end();
  if (req.method !== "POST") return res.writeHead(405).end();
  let body = "";
  req.on("data", (c) => (body += c));
  req.on("end", async () => {
    const token = (req.headers.authorization ?? "").replace(/^Bearer /, "");
    try {
      const { payload } = await jwtVerify(token, jwks, { issuer, audience: mcpUrl });
      if (!String(payload.scope ?? "").split(" ").includes("mcp:tools")) throw new Error("scope");
    } catch (err) {
      log(`mcp_401 ${err.code ?? err.message}`);
      res.writeHead(401, { "www-authenticate": `Bearer resource_metadata="${prm}", scope="mcp:tools"`, "content-type": "application/json" });
      return res.end(JSON.stringify({ error: "invalid_token" }));
    }
    const msg = JSON.parse(body);
    if (msg.id === undefined) return res.writeHead(202).end();
    const result =
      msg.method === "initialize"
        ? { protocolVersion: msg.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "protected", version: "1" } }
        : msg.method === "tools/list"
          ? { tools: [{ name: "whoami", inputSchema: { type: "object" } }] }
          : { content: [{ type: "text", text: "user-1" }] };
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ jsonrpc: "2.0", id: msg.id, result }));
  });
});

console.log(`${opPort} ${mcpPort}`);
