// A small MCP host that runs server-everything's `simulate-research-query` as a task, built
// on the TypeScript SDK v2 client (@modelcontextprotocol/client) and its tasks requester
// (@modelcontextprotocol/ext-tasks), the one API over both generations of tasks.
//
//   node tasks_client.mjs [--era legacy|2026-07-28] [--scenario complete|cancel|ask]
//                         [--timeout SECONDS] [--no-open-result] (--url URL | --stdio COMMAND ARGS…)
//
// --era legacy      the handshake era (initialize, Mcp-Session-Id) with 2025-11-25 tasks
//                   (ext-tasks generation "v1"); over --url or --stdio.
// --era 2026-07-28  stateless requests pinned to 2026-07-28 (`server/discover`, `_meta` on
//                   every request) with the tasks extension `io.modelcontextprotocol/tasks`
//                   (ext-tasks generation "v2"); --url only: the SDK client's codecs do not
//                   carry the extension's shapes, so ext-tasks needs a host-owned raw request
//                   path (`rawDispatch`), which this script provides as plain HTTP POSTs.
//
// Scenarios: `complete` calls {topic:"python"} as a task and awaits its result; `cancel`
// starts it, cancels it, and awaits the task's final status as the server reports it;
// `ask` calls {topic:"python", ambiguous:true} and answers the one elicitation the task
// asks (accept, the first option), then awaits the result.
//
// Prints ONE JSON line on stdout and exits 0, or writes why on stderr and exits 1:
//   {"era","scenario","status","outcome","error"?,"text","taskId","statuses","asked",
//    "answers","resultRequest","notifications","generation","errors"}
// `status` is the server's final word on the task (tasks/get once it is terminal);
// `outcome` is what ext-tasks settled the execution as; `statuses` every distinct status
// observed in order (polling and notifications); `asked` how many questions were answered.

const PEERS = new URL("../../.cache/peers/node_modules/", import.meta.url);
const peer = (path) => import(new URL(path, PEERS).href);

const { Client, StreamableHTTPClientTransport } = await peer("@modelcontextprotocol/client/dist/index.mjs");
const { StdioClientTransport } = await peer("@modelcontextprotocol/client/dist/stdio.mjs");
const { createTaskSessionFromClient, toolDeclarationFromMcpTool, resultFromTaskOutcome } = await peer(
  "@modelcontextprotocol/ext-tasks/dist/client/index.js",
);

const TOOL = "simulate-research-query";
const MODERN = "2026-07-28";
const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";
const RELATED_TASK = "io.modelcontextprotocol/related-task";
const CLIENT_INFO = { name: "tasks-client", version: "1.0.0" };

function parseArgs(argv) {
  const options = { era: "legacy", scenario: "complete", timeout: 60, url: undefined, stdio: undefined, openResult: true };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${arg} needs a value`);
      return argv[++i];
    };
    if (arg === "--era") options.era = value();
    else if (arg === "--scenario") options.scenario = value();
    else if (arg === "--timeout") options.timeout = Number(value());
    else if (arg === "--url") options.url = value();
    else if (arg === "--no-open-result") options.openResult = false;
    else if (arg === "--stdio") {
      options.stdio = argv.slice(i + 1);
      break;
    } else throw new Error(`unknown argument ${arg}`);
  }
  if (!["legacy", MODERN].includes(options.era)) throw new Error(`--era is legacy or ${MODERN}`);
  if (!["complete", "cancel", "ask"].includes(options.scenario)) throw new Error("--scenario is complete, cancel or ask");
  if ((options.url === undefined) === (options.stdio === undefined || options.stdio.length === 0))
    throw new Error("give exactly one of --url URL or --stdio COMMAND ARGS…");
  if (options.era === MODERN && options.url === undefined)
    throw new Error(`--era ${MODERN} needs --url: ext-tasks' v2 requests go through this script's own HTTP POSTs`);
  if (!(options.timeout > 0)) throw new Error("--timeout must be positive");
  return options;
}

/** An error's message with its causes (a schema failure says which field, in its cause). */
function describe(error) {
  const parts = [];
  for (let e = error, depth = 0; e !== undefined && e !== null && depth < 5; e = e.cause, depth++) {
    const part = Array.isArray(e.issues) ? JSON.stringify(e.issues).slice(0, 1500) : e.message ?? String(e);
    if (part !== parts[parts.length - 1]) parts.push(part);
  }
  return parts.join(" <- ");
}

const log = (...parts) => process.stderr.write(`tasks_client: ${parts.join(" ")}\n`);

/** Rejects when `signal` aborts; resolves after `ms` otherwise. */
function delay(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/** A Standard Schema that accepts any JSON value, for `client.request` of raw methods. */
const anyJson = {
  "~standard": { version: 1, vendor: "tasks-client", validate: (value) => ({ value }) },
};

// ---------------------------------------------------------------------------------------
// The raw request path ext-tasks needs for a 2026-07-28 server (`rawDispatch`): one POST per
// request, the 2026-07-28 headers mirrored from the body, the answer read from a JSON body
// or from the SSE stream the server answers with.

const HEADER_NAME_FIELD = {
  "tools/call": "name",
  "prompts/get": "name",
  "resources/read": "uri",
  "tasks/get": "taskId",
  "tasks/update": "taskId",
  "tasks/cancel": "taskId",
};

function headerValue(value) {
  const plain = /^[\x21-\x7e]([\x20-\x7e\t]*[\x21-\x7e])?$/.test(value) && !(value.startsWith("=?base64?") && value.endsWith("?="));
  return plain ? value : `=?base64?${Buffer.from(value, "utf8").toString("base64")}?=`;
}

function makeRawDispatch(url, onNotification) {
  let nextId = 0;
  const reserved = new Set(["content-type", "accept", "mcp-protocol-version", "mcp-method", "mcp-name"]);
  return async (request, options = {}) => {
    const id = `raw-${++nextId}`;
    const message = { jsonrpc: "2.0", id, ...request };
    const headers = {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": request.params?._meta?.["io.modelcontextprotocol/protocolVersion"] ?? MODERN,
      "mcp-method": request.method,
    };
    const field = HEADER_NAME_FIELD[request.method];
    const name = field && request.params?.[field];
    if (typeof name === "string") headers["mcp-name"] = headerValue(name);
    for (const [key, value] of Object.entries(options.context?.headers ?? {}))
      if (!reserved.has(key.toLowerCase()) && value !== undefined) headers[key] = value;
    const timeout = AbortSignal.timeout(options.context?.requestTimeoutMs ?? 60_000);
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    const response = await fetch(url, { method: "POST", headers, body: JSON.stringify(message), signal });
    const type = (response.headers.get("content-type") ?? "").split(";")[0].trim().toLowerCase();
    let answer;
    if (type === "text/event-stream") {
      answer = await readSseAnswer(response, id, onNotification);
    } else {
      const text = await response.text();
      try {
        answer = JSON.parse(text);
      } catch {
        throw new Error(`${request.method}: HTTP ${response.status} ${type || "(no content type)"}: ${text.slice(0, 500)}`);
      }
    }
    if (answer?.error) return { kind: "error", error: answer.error };
    if (answer && "result" in answer) return { kind: "result", result: answer.result };
    throw new Error(`${request.method}: HTTP ${response.status} without a JSON-RPC answer: ${JSON.stringify(answer).slice(0, 500)}`);
  };
}

async function readSseAnswer(response, id, onNotification) {
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of response.body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end;
    while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, "");
      const data = event
        .split(/\r?\n/)
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).replace(/^ /, ""))
        .join("\n");
      if (!data) continue;
      const message = JSON.parse(data);
      if (message.id === id && ("result" in message || "error" in message)) return message;
      if (message.method && message.id === undefined) onNotification(message);
      else throw new Error(`unexpected message on a 2026-07-28 response stream: ${data.slice(0, 500)}`);
    }
  }
  throw new Error("the response stream ended without an answer");
}

// ---------------------------------------------------------------------------------------

/** The answer to an elicitation: accept, each property's first option (or a plain value). */
function answerElicitation(params) {
  const content = {};
  for (const [key, schema] of Object.entries(params?.requestedSchema?.properties ?? {})) {
    if (Array.isArray(schema.oneOf) && schema.oneOf.length) content[key] = schema.oneOf[0].const;
    else if (Array.isArray(schema.enum) && schema.enum.length) content[key] = schema.enum[0];
    else if (schema.type === "boolean") content[key] = true;
    else if (schema.type === "number" || schema.type === "integer") content[key] = 1;
    else content[key] = "yes";
  }
  return { action: "accept", content };
}

async function waitForTool(client, signal) {
  // server-everything registers its task tools once it has seen notifications/initialized.
  for (;;) {
    const { tools } = await client.listTools(undefined, { cacheMode: "bypass", signal });
    const tool = tools.find((t) => t.name === TOOL);
    if (tool) return tool;
    await delay(100, signal);
  }
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const deadline = AbortSignal.timeout(options.timeout * 1000);
  const modern = options.era === MODERN;

  const capabilities = { elicitation: { form: {} } };
  if (modern) capabilities.extensions = { [TASKS_EXTENSION]: {} };
  const client = new Client(CLIENT_INFO, {
    capabilities,
    ...(modern ? { versionNegotiation: { mode: { pin: MODERN } } } : {}),
  });
  client.onerror = (error) => log("client error:", error?.message ?? String(error));

  const transport = options.url
    ? new StreamableHTTPClientTransport(new URL(options.url))
    : new StdioClientTransport({
        command: options.stdio[0],
        args: options.stdio.slice(1),
        env: process.env,
        stderr: "inherit",
      });

  const statuses = [];
  const notifications = [];
  const answers = [];
  const errors = [];
  const note = (status) => {
    if (status && statuses[statuses.length - 1] !== status) statuses.push(status);
  };
  let taskId;

  await client.connect(transport, { signal: deadline, timeout: options.timeout * 1000 });
  const era = client.getProtocolEra();
  if (era !== (modern ? "modern" : "legacy")) throw new Error(`connected in the ${era} era, not ${options.era}`);

  const tool = await waitForTool(client, deadline);
  const declaration = toolDeclarationFromMcpTool(tool);

  const onNotification = (message) => {
    if (message.method === "notifications/tasks/status" || message.method === "notifications/tasks") {
      notifications.push(message.params?.status);
      if (message.params?.taskId === taskId) note(message.params?.status);
    }
  };
  // Task status notifications the SDK client has no handler for reach ext-tasks' fallback;
  // chain in front of it to record them as well.
  const framing = { protocolVersion: MODERN, clientInfo: CLIENT_INFO, clientCapabilities: capabilities };
  const session = createTaskSessionFromClient(client, {
    endpointId: options.url ?? options.stdio.join(" "),
    tools: { currentTool: (name) => (name === TOOL ? declaration : undefined) },
    onInputRequest: async (request, context) => {
      if (request.kind !== "elicitation") throw new Error(`unexpected ${request.kind} request`);
      const answer = answerElicitation(request.params);
      answers.push({ taskId: context.taskId ?? null, scope: context.scope, delivery: context.delivery, content: answer.content });
      return answer;
    },
    onError: (error) => {
      errors.push(error?.message ?? String(error));
      log("ext-tasks:", error?.message ?? String(error));
    },
    ...(modern ? { rawDispatch: makeRawDispatch(options.url, onNotification), v2RequestFraming: framing } : {}),
  });
  const fallback = client.fallbackNotificationHandler;
  client.fallbackNotificationHandler = async (notification) => {
    onNotification(notification);
    await fallback?.(notification);
  };
  const generation = session.capabilities.execution ? (modern ? "v2" : "v1") : "none";
  if (generation === "none") throw new Error("the server offers no tasks ext-tasks can use");

  const args = options.scenario === "ask" ? { topic: "python", ambiguous: true } : { topic: "python" };
  const execution = await session.callTool(TOOL, args, {
    task: { preference: "require" },
    signal: deadline,
    requestTimeoutMs: options.timeout * 1000,
  });
  if (execution.kind !== "task") throw new Error("the call was not run as a task");
  taskId = execution.handle.taskId;

  // A 2025-11-25 server delivers a task's questions on the stream of a tasks/result request
  // (input_required: "the requestor SHOULD call tasks/result"); ext-tasks' v1 driver only
  // polls tasks/get until the task is terminal, so open tasks/result here when the task
  // needs input, as a 2025-11-25 requestor does. Its answers arrive through ext-tasks.
  // (--no-open-result leaves that out, to see a server push the questions on its own.)
  let resultRequest;
  let resultRequestEnd = "not opened";
  const openResult = () => {
    if (modern || !options.openResult || resultRequest) return;
    resultRequestEnd = "pending";
    resultRequest = client
      .request({ method: "tasks/result", params: { taskId } }, anyJson, { signal: deadline, timeout: options.timeout * 1000 })
      .then(
        () => (resultRequestEnd = "result"),
        (error) => (resultRequestEnd = `error: ${error?.message ?? String(error)}`),
      );
  };
  const onEvent = (event) => {
    if (event.type === "task") {
      note(event.task.status);
      if (event.task.status === "input_required") openResult();
    }
  };

  let outcome;
  if (options.scenario === "cancel") {
    const observing = execution.settle({ onEvent, signal: deadline, close: false });
    await execution.cancel(deadline);
    ({ outcome } = await observing);
  } else {
    ({ outcome } = await execution.settle({ onEvent, signal: deadline }));
  }

  // The server's final word: tasks/get until the task is terminal.
  const controller = session.task(taskId);
  let view = await controller.snapshot(deadline);
  while (!["completed", "failed", "cancelled"].includes(view.status)) {
    await delay(view.suggestedPollIntervalMs ?? 200, deadline);
    view = await controller.snapshot(deadline);
  }
  note(view.status);

  // The tasks/result opened for the questions ends with the task.
  if (resultRequest) await Promise.race([resultRequest, delay(5_000, deadline)]);

  let text = null;
  if (outcome.status === "completed") {
    const result = resultFromTaskOutcome(outcome);
    text = (result.content ?? [])
      .filter((block) => block.type === "text")
      .map((block) => block.text)
      .join("\n");
  }
  const report = {
    era: options.era,
    scenario: options.scenario,
    status: view.status,
    outcome: outcome.status,
    ...(outcome.status === "failed" ? { error: describe(outcome.error) } : {}),
    text,
    taskId,
    statuses,
    asked: answers.length,
    resultRequest: resultRequestEnd,
    answers,
    notifications,
    generation,
    errors,
  };
  await session.close().catch(() => {});
  await client.close().catch(() => {});
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

main().then(
  () => process.exit(0),
  (error) => {
    log("failed:", error?.stack ?? String(error));
    process.exit(1);
  },
);
