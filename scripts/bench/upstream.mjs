// A fast local Streamable HTTP upstream for benchmarks: JSON answers, one session, 202 for
// notifications, 405 for GET. Prints its port on stdout.
// With "modern" as its second argument it is a 2026-07-28 server instead: server/discover,
// no sessions, results with resultType, initialize refused with -32022.
// With "sse" it is a 2024-11-05 HTTP+SSE server: GET /sse opens the stream (its first event
// names /messages?sessionId=…), POST there answers 202 and the answer goes out on the stream.
import http from "node:http";

const modern = process.argv[3] === "modern";
const sse = process.argv[3] === "sse";
const streams = new Map();
let nextSession = 0;

function answer(msg) {
  return msg.method === "initialize"
    ? { protocolVersion: msg.params?.protocolVersion ?? "2024-11-05", capabilities: { tools: {} }, serverInfo: { name: "bench", version: "1" } }
    : { content: [{ type: "text", text: "ok" }] };
}

// Reads the request body as JSON and hands it on; 400 when it is not JSON.
function readJson(req, res, then) {
  let body = "";
  req.on("data", (chunk) => (body += chunk));
  req.on("end", () => {
    let msg;
    try {
      msg = JSON.parse(body);
    } catch {
      return res.writeHead(400).end();
    }
    then(msg);
  });
}

function sseServer(req, res) {
  const url = new URL(req.url, "http://x");
  if (req.method === "GET" && url.pathname === "/sse") {
    const session = String(++nextSession);
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    res.write(`event: endpoint\ndata: /messages?sessionId=${session}\n\n`);
    streams.set(session, res);
    req.on("close", () => streams.delete(session));
    return;
  }
  if (req.method !== "POST" || url.pathname !== "/messages") return res.writeHead(405).end();
  const stream = streams.get(url.searchParams.get("sessionId"));
  if (!stream) return res.writeHead(404).end();
  readJson(req, res, (msg) => {
    res.writeHead(202).end("Accepted");
    if (msg.id !== undefined && msg.method !== undefined) {
      stream.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: "2.0", id: msg.id, result: answer(msg) })}\n\n`);
    }
  });
}

const server = http.createServer((req, res) => {
  if (sse) return sseServer(req, res);
  if (req.method === "GET") return res.writeHead(405).end();
  if (req.method === "DELETE") return res.writeHead(200).end();
  readJson(req, res, (msg) => {
    if (msg.id === undefined) return res.writeHead(202).end();
    if (modern) {
      const claimed = msg.params?._meta?.["io.modelcontextprotocol/protocolVersion"];
      if (!claimed) {
        res.writeHead(400, { "content-type": "application/json" });
        return res.end(JSON.stringify({ jsonrpc: "2.0", id: msg.id, error: { code: -32022, message: "Unsupported protocol version", data: { supported: ["2026-07-28"] } } }));
      }
      const result =
        msg.method === "server/discover"
          ? { resultType: "complete", supportedVersions: ["2026-07-28"], capabilities: { tools: {} }, ttlMs: 0, cacheScope: "private", _meta: { "io.modelcontextprotocol/serverInfo": { name: "bench", version: "1" } } }
          : msg.method === "tools/list"
            ? { resultType: "complete", ttlMs: 0, cacheScope: "private", tools: [{ name: "echo", inputSchema: { type: "object" } }] }
            : { resultType: "complete", content: [{ type: "text", text: "ok" }] };
      res.writeHead(200, { "content-type": "application/json" });
      return res.end(JSON.stringify({ jsonrpc: "2.0", id: msg.id, result }));
    }
    const result = answer(msg);
    res.writeHead(200, { "content-type": "application/json", "mcp-session-id": "bench-session" });
    res.end(JSON.stringify({ jsonrpc: "2.0", id: msg.id, result }));
  });
});
server.keepAliveTimeout = 60_000;
server.listen(Number(process.argv[2] ?? 0), "127.0.0.1", () => console.log(server.address().port));
