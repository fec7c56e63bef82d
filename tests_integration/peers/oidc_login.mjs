// A real OpenID Provider (the npm package oidc-provider, OpenID Certified) for `serve
// --login-oidc`: one confidential client (argv[2] its redirect URI, argv[3] its secret), a
// login page with a user-name form (any name signs in; its email is the name, or
// NAME@example.com), and consent approved at once. As the provider does by default, the
// id_token carries only `sub`: `email` comes from UserInfo. A name's prefix picks how the
// provider reports the email: `unverified-` email_verified false, `silent-` no
// email_verified at all (Microsoft Entra), `stringfalse-` / `stringtrue-` the strings
// "false" / "true" (Amazon Cognito's UserInfo); any other name is verified. Every user is
// in the group `staff`, and one whose name starts `oncall-` in `on call` too (a `groups`
// claim released with the openid scope, from UserInfo). Prints its port.
import http from "node:http";
import Provider from "oidc-provider";

const [redirectUri, secret] = process.argv.slice(2);
const server = http.createServer();
const port = await new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server.address().port)));
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: "mcp-serve",
    client_secret: secret,
    redirect_uris: [redirectUri],
    grant_types: ["authorization_code"],
    response_types: ["code"],
    token_endpoint_auth_method: "client_secret_basic",
  }],
  features: { devInteractions: { enabled: false } },
  claims: { openid: ["sub", "groups"], email: ["email", "email_verified"] },
  findAccount: (ctx, id) => ({
    accountId: id,
    claims: () => {
      const email = id.includes("@") ? id : `${id}@example.com`;
      const verified = id.startsWith("unverified-") ? { email_verified: false }
        : id.startsWith("silent-") ? {}
        : id.startsWith("stringfalse-") ? { email_verified: "false" }
        : id.startsWith("stringtrue-") ? { email_verified: "true" }
        : { email_verified: true };
      const groups = id.startsWith("oncall-") ? ["staff", "on call"] : ["staff"];
      return { sub: id, email, groups, ...verified };
    },
  }),
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
});

const page = (uid) => `<!doctype html><title>Sign in</title><h1>Sign in</h1>
<form method="post" action="/interaction/${uid}/login"><label>User <input name="login"></label>
<button type="submit">Sign in</button></form>`;

server.on("request", async (req, res) => {
  const match = req.url.match(/^\/interaction\/([^/]+)(\/login)?$/);
  if (!match) return provider.callback()(req, res);
  try {
    const details = await provider.interactionDetails(req, res);
    if (details.prompt.name === "login") {
      if (req.method === "GET") {
        res.writeHead(200, { "content-type": "text/html" });
        return res.end(page(details.uid));
      }
      let body = "";
      for await (const chunk of req) body += chunk;
      const login = new URLSearchParams(body).get("login");
      return provider.interactionFinished(req, res, { login: { accountId: login } }, { mergeWithLastSubmission: false });
    }
    const grant = new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
    grant.addOIDCScope(details.params.scope);
    const grantId = await grant.save();
    return provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
  } catch (err) {
    res.writeHead(500).end(String(err));
  }
});

console.log(port);
