// Enterprise-managed authorization (SEP-990) around a real OpenID Provider: the npm package
// oidc-provider (OpenID Certified) is the organisation's identity provider, where a native
// client ("mcp-stdio", public, PKCE, redirect argv[3]) logs users in (approved at once, as
// "alice"). oidc-provider has no RFC 8693 token exchange, so this script registers one as an
// extension grant (the provider's registerGrantType): it verifies the subject token is an ID
// token the provider issued to that client and mints an ID-JAG (typ oauth-id-jag+jwt) for the
// `audience` and `resource` asked for. The MCP server's authorization server is this
// script's too (test-side): it takes the ID-JAG with the JWT bearer grant from the
// confidential client "xaa-client" (client_secret_basic, secret argv[4]) and issues ES256 JWT
// access tokens for the resources in argv[2] (comma-separated; `serve --oauth-issuer`
// checks them). Events go to
// argv[5]. Prints "<idp port> <as port>".
import http from "node:http";
import fs from "node:fs";
import crypto from "node:crypto";
import Provider from "oidc-provider";
import { SignJWT, exportJWK, generateKeyPair, jwtVerify, decodeProtectedHeader } from "jose";

const [resourceList, redirectUri, asSecret, logFile] = process.argv.slice(2);
const resources = resourceList.split(",");
const log = (line) => fs.appendFileSync(logFile, line + "\n");
const listen = (server) => new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server.address().port)));
const TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange";
const ID_JAG = "urn:ietf:params:oauth:token-type:id-jag";
const JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer";

const idpServer = http.createServer();
const idpPort = await listen(idpServer);
const idpIssuer = `http://127.0.0.1:${idpPort}`;
const asServer = http.createServer();
const asPort = await listen(asServer);
const asIssuer = `http://127.0.0.1:${asPort}`;

// The provider's ID token key, the IdP's ID-JAG key, and the MCP authorization server's key.
const idKeys = await generateKeyPair("RS256", { extractable: true });
const jagKeys = await generateKeyPair("ES256");
const asKeys = await generateKeyPair("ES256", { extractable: true });
const asJwk = { ...(await exportJWK(asKeys.publicKey)), kid: "as-1", alg: "ES256", use: "sig" };

const provider = new Provider(idpIssuer, {
  clients: [{
    client_id: "mcp-stdio",
    application_type: "native",
    token_endpoint_auth_method: "none",
    redirect_uris: [redirectUri],
    grant_types: ["authorization_code", "refresh_token", TOKEN_EXCHANGE],
    response_types: ["code"],
  }],
  jwks: { keys: [{ ...(await exportJWK(idKeys.privateKey)), kid: "idp-1", alg: "RS256", use: "sig" }] },
  features: { devInteractions: { enabled: false } },
  pkce: { required: () => true },
  scopes: ["openid", "offline_access"],
  findAccount: (ctx, id) => ({ accountId: id, claims: () => ({ sub: id, email: `${id}@example.com` }) }),
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
});

provider.registerGrantType(TOKEN_EXCHANGE, async (ctx) => {
  const p = ctx.oidc.params;
  const fail = (why) => {
    log(`exchange_refused ${why}`);
    ctx.status = 400;
    ctx.body = { error: "invalid_request", error_description: why };
  };
  if (p.subject_token_type !== "urn:ietf:params:oauth:token-type:id_token") return fail("subject_token_type");
  if (p.requested_token_type !== ID_JAG) return fail("requested_token_type");
  if (!p.audience || !p.resource) return fail("audience and resource are required");
  let subject;
  try {
    ({ payload: subject } = await jwtVerify(p.subject_token, idKeys.publicKey, { issuer: idpIssuer, audience: ctx.oidc.client.clientId }));
  } catch (err) {
    log(`exchange_refused ${err.code ?? err.message}`);
    ctx.status = 400;
    ctx.body = { error: "invalid_grant", error_description: "the subject token is not our ID token" };
    return;
  }
  const idJag = await new SignJWT({ sub: subject.sub, resource: p.resource, client_id: "xaa-client", email: subject.email })
    .setProtectedHeader({ alg: "ES256", typ: "oauth-id-jag+jwt" })
    .setIssuer(idpIssuer).setAudience(p.audience).setIssuedAt().setExpirationTime("5m").setJti(crypto.randomUUID())
    .sign(jagKeys.privateKey);
  log(`exchanged ${subject.sub} audience=${p.audience} resource=${p.resource}`);
  ctx.body = { access_token: idJag, issued_token_type: ID_JAG, token_type: "N_A", expires_in: 300 };
}, ["subject_token", "subject_token_type", "requested_token_type", "audience", "resource", "scope"]);

provider.on("server_error", (ctx, err) => log(`server_error ${err} ${err.stack?.split("\n")[1] ?? ""}`));
provider.on("grant.success", (ctx) => log(`grant ${ctx.oidc.params.grant_type}`));
provider.on("grant.error", (ctx, err) => log(`grant_error ${err} ${err.error_description ?? ""}`));
provider.on("authorization.error", (ctx, err) => log(`authorization_error ${err} ${err.error_description ?? ""}`));

const approve = async (req, res) => {
  const details = await provider.interactionDetails(req, res);
  if (details.prompt.name === "login") {
    log("idp_login");
    return provider.interactionFinished(req, res, { login: { accountId: "alice" } }, { mergeWithLastSubmission: false });
  }
  const grant = new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
  grant.addOIDCScope(details.params.scope);
  const grantId = await grant.save();
  return provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
};
const callback = provider.callback();
idpServer.on("request", (req, res) => {
  if (req.url.startsWith("/interaction/")) {
    approve(req, res).catch((err) => { log(`interaction_error ${err}`); res.writeHead(500).end(); });
    return;
  }
  callback(req, res);
});

// The MCP server's authorization server: metadata, keys, and the JWT bearer grant only.
const json = (res, status, body) => { res.writeHead(status, { "content-type": "application/json" }); res.end(JSON.stringify(body)); };
asServer.on("request", (req, res) => {
  if (req.method === "GET" && req.url === "/.well-known/oauth-authorization-server") {
    return json(res, 200, {
      issuer: asIssuer, authorization_endpoint: `${asIssuer}/authorize`, token_endpoint: `${asIssuer}/token`,
      jwks_uri: `${asIssuer}/jwks`, grant_types_supported: [JWT_BEARER], code_challenge_methods_supported: ["S256"],
      token_endpoint_auth_methods_supported: ["client_secret_basic"],
    });
  }
  if (req.method === "GET" && req.url === "/jwks") return json(res, 200, { keys: [asJwk] });
  if (req.method !== "POST" || req.url !== "/token") return res.writeHead(404).end();
  let body = "";
  req.on("data", (c) => (body += c));
  req.on("end", async () => {
    const form = new URLSearchParams(body);
    const [id, secret] = Buffer.from((req.headers.authorization ?? "").replace(/^Basic /, ""), "base64").toString().split(":").map(decodeURIComponent);
    if (id !== "xaa-client" || secret !== asSecret) { log("as_refused client"); return json(res, 401, { error: "invalid_client" }); }
    if (form.get("grant_type") !== JWT_BEARER) { log("as_refused grant"); return json(res, 400, { error: "unsupported_grant_type" }); }
    try {
      const assertion = form.get("assertion");
      if (decodeProtectedHeader(assertion).typ !== "oauth-id-jag+jwt") throw new Error("typ");
      const { payload } = await jwtVerify(assertion, jagKeys.publicKey, { issuer: idpIssuer, audience: asIssuer });
      if (payload.client_id !== id || !resources.includes(payload.resource)) throw new Error("client_id or resource");
      const token = await new SignJWT({ scope: "mcp:tools", client_id: id, email: payload.email })
        .setProtectedHeader({ alg: "ES256", typ: "at+jwt", kid: "as-1" })
        .setIssuer(asIssuer).setAudience(payload.resource).setSubject(payload.sub).setIssuedAt().setExpirationTime("10m")
        .sign(asKeys.privateKey);
      log(`as_issued ${payload.sub}`);
      json(res, 200, { access_token: token, token_type: "Bearer", expires_in: 600, scope: "mcp:tools" });
    } catch (err) {
      log(`as_refused ${err.code ?? err.message}`);
      json(res, 400, { error: "invalid_grant" });
    }
  });
});

console.log(`${idpPort} ${asPort}`);
