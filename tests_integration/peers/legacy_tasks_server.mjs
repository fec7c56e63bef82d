#!/usr/bin/env node
/**
 * A handshake-era stdio MCP server speaking 2025-11-25 tasks (SEP-1686), built on the
 * TypeScript SDK v1 (@modelcontextprotocol/sdk 1.32.x, installed by install.sh as
 * server-everything's dependency) and its experimental tasks API, with the tools the
 * conformance suite's `tasks-*` scenarios call. test_conformance_tasks.py runs the suite
 * against `mcp-stdio serve` in front of it: what the suite judges is the gateway's
 * translation to the 2026-07-28 tasks extension.
 *
 *   greet               forbidden  "Hello, NAME!" at once
 *   slow_compute        optional   sleeps `seconds`, then a text result; cancellable
 *   failing_job         required   after ~1 s: a tool error (isError) as the task's result
 *   protocol_error_job  required   after ~0.5 s: tasks/result answers a JSON-RPC error
 *   confirm_delete      required   one elicitation/create tied to the task, then done
 *   multi_input         required   two elicitations at once, done when both are answered
 *   test_tool_with_task required   asks the name BEFORE creating the task (an elicitation
 *                                  during the tools/call), then a task whose result says it
 *
 * Questions tied to a task go out with `relatedTask`: the SDK queues them and writes them
 * only while a `tasks/result` for the task is open (the gateway holds one per task).
 * SDK location: $MCP_PEERS_NODE_MODULES, else the checkout's .cache/peers/node_modules.
 */
const NM = process.env.MCP_PEERS_NODE_MODULES ?? new URL('../../.cache/peers/node_modules', import.meta.url).pathname;
const SDK = `${NM}/@modelcontextprotocol/sdk/dist/esm`;
const { McpServer } = await import(`${SDK}/server/mcp.js`);
const { StdioServerTransport } = await import(`${SDK}/server/stdio.js`);
const { InMemoryTaskStore, InMemoryTaskMessageQueue } = await import(`${SDK}/experimental/tasks/stores/in-memory.js`);
const { ElicitResultSchema, McpError, ErrorCode } = await import(`${SDK}/types.js`);
const { z } = await import(`${NM}/zod/v4/index.js`);

const POLL_INTERVAL_MS = 200; // also the latency with which tasks/result notices new queued messages / completion
const ELICIT_TIMEOUT_MS = 10 * 60_000; // SDK request timeout starts when the request is QUEUED, not when delivered

/**
 * InMemoryTaskStore plus:
 *  - cancellation hook: the SDK's tasks/cancel handler only flips the status in the store
 *    (no signal reaches the tool), so we abort the task's AbortController from here;
 *  - protocol errors: InMemoryTaskStore can only hold a Result; to make tasks/result answer with a
 *    JSON-RPC error we remember the error and throw it from getTaskResult (the SDK turns a thrown
 *    McpError into {"error":{code,message,data}}).
 */
class LegacyTaskStore extends InMemoryTaskStore {
  constructor() {
    super();
    this.controllers = new Map(); // taskId -> AbortController
    this.protocolErrors = new Map(); // taskId -> McpError
  }
  controllerFor(taskId) {
    let c = this.controllers.get(taskId);
    if (!c) this.controllers.set(taskId, (c = new AbortController()));
    return c;
  }
  async updateTaskStatus(taskId, status, statusMessage, sessionId) {
    await super.updateTaskStatus(taskId, status, statusMessage, sessionId);
    if (status === 'cancelled') this.controllers.get(taskId)?.abort(new Error('Task cancelled by client'));
    if (['completed', 'failed', 'cancelled'].includes(status)) this.controllers.delete(taskId);
  }
  async storeTaskResult(taskId, status, result, sessionId) {
    await super.storeTaskResult(taskId, status, result, sessionId);
    this.controllers.delete(taskId);
  }
  async getTaskResult(taskId, sessionId) {
    const err = this.protocolErrors.get(taskId);
    if (err && (await this.getTask(taskId, sessionId))) throw err;
    return super.getTaskResult(taskId, sessionId);
  }
}

const taskStore = new LegacyTaskStore();
const taskMessageQueue = new InMemoryTaskMessageQueue();

const server = new McpServer(
  { name: 'legacy-tasks-example', version: '1.0.0' },
  {
    capabilities: {
      tools: {},
      tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
    },
    taskStore,
    taskMessageQueue,
  },
);
server.server.onerror = (e) => console.error('[legacy-tasks] onerror:', e?.message ?? e);

const text = (t) => ({ content: [{ type: 'text', text: t }] });
const sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => { clearTimeout(t); reject(signal.reason); }, { once: true });
  });

/**
 * Registers a 2025-11-25 task tool. `work(args, ctx)` runs in the background after the
 * CreateTaskResult has been returned; ctx = { taskId, signal, extra, ask }.
 * Its return value (a CallToolResult) is stored as the "completed" result; exceptions fail the task.
 */
function registerTaskTool(name, { description, inputSchema, taskSupport }, work) {
  server.experimental.tasks.registerToolTask(
    name,
    { description, inputSchema, execution: { taskSupport } },
    {
      async createTask(args, extra) {
        const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl ?? null, pollInterval: POLL_INTERVAL_MS });
        const taskId = task.taskId;
        const { signal } = taskStore.controllerFor(taskId);
        // Ask the client something *tied to the task*: queued until the client calls tasks/result.
        const ask = (params, schema = ElicitResultSchema) =>
          extra.sendRequest({ method: 'elicitation/create', params: { mode: 'form', ...params } }, schema, {
            relatedTask: { taskId }, // => status input_required + queued + _meta related-task
            timeout: ELICIT_TIMEOUT_MS,
            signal, // on tasks/cancel the pending request is abandoned (SDK emits notifications/cancelled)
          });
        const snapshot = { ...task }; // the store returns its live object; copy it so the CreateTaskResult shows the creation state
        setImmediate(async () => {
          try {
            const result = await work(args, { taskId, signal, extra, ask });
            await extra.taskStore.storeTaskResult(taskId, 'completed', result);
          } catch (err) {
            if (signal.aborted) return; // cancelled: status already "cancelled", nothing to store
            if (err instanceof ToolFailure) {
              await extra.taskStore.storeTaskResult(taskId, 'failed', { ...text(err.message), isError: true }).catch(() => {});
            } else {
              const mcpErr = err instanceof McpError ? err : new McpError(ErrorCode.InternalError, String(err?.message ?? err));
              taskStore.protocolErrors.set(taskId, mcpErr);
              await extra.taskStore.storeTaskResult(taskId, 'failed', { content: [] }).catch(() => {});
            }
          }
        });
        return { task: snapshot };
      },
      // Never called by SDK 1.32.x (tasks/get and tasks/result are answered from the TaskStore),
      // but required by the ToolTaskHandler type.
      getTask: async (_args, { taskId, taskStore: s }) => s.getTask(taskId),
      getTaskResult: async (_args, { taskId, taskStore: s }) => s.getTaskResult(taskId),
    },
  );
}
/** Thrown by a task body to end the task as "failed" with a CallToolResult{isError:true}. */
class ToolFailure extends Error {}

/** Moves the task back to "working" after its questions were answered (the SDK never does this itself). */
async function backToWorking(extra, taskId, statusMessage) {
  try { await extra.taskStore.updateTaskStatus(taskId, 'working', statusMessage); } catch { /* already terminal */ }
}

// --- greet: plain tool (taskSupport "forbidden") -------------------------------------------
server.registerTool(
  'greet',
  { description: 'Returns a greeting immediately (no task support).', inputSchema: { name: z.string().default('World') } },
  async ({ name }) => text(`Hello, ${name}!`),
);

// --- slow_compute: optional task support --------------------------------------------------
registerTaskTool(
  'slow_compute',
  {
    description: 'Sleeps `seconds` (default 1.5) and returns a result. Cancellable.',
    inputSchema: { seconds: z.number().min(0).default(1.5), label: z.string().optional() },
    taskSupport: 'optional',
  },
  async ({ seconds, label }, { signal }) => {
    await sleep(seconds * 1000, signal);
    return text(`Computed ${label ? `'${label}' ` : ''}after ${seconds}s`);
  },
);

// --- failing_job: tool execution error --------------------------------------------------
registerTaskTool(
  'failing_job',
  { description: 'Fails after ~1 s with a tool execution error (isError:true).', inputSchema: {}, taskSupport: 'required' },
  async (_args, { signal }) => {
    await sleep(1000, signal);
    throw new ToolFailure('Job failed: simulated tool execution error');
  },
);

// --- protocol_error_job: JSON-RPC level error ---------------------------------------------
registerTaskTool(
  'protocol_error_job',
  { description: 'Ends with a JSON-RPC error (returned by tasks/result).', inputSchema: {}, taskSupport: 'required' },
  async (_args, { signal }) => {
    await sleep(500, signal);
    throw new McpError(ErrorCode.InternalError, 'Simulated internal failure in protocol_error_job', { reason: 'panic' });
  },
);

// --- confirm_delete: single elicitation ---------------------------------------------------
registerTaskTool(
  'confirm_delete',
  {
    description: 'Asks for confirmation (elicitation/create) before deleting `filename`.',
    // delay_seconds (optional, default 0): wait before asking, e.g. to observe tasks/result picking the question up late
    inputSchema: { filename: z.string().default('unknown.txt'), delay_seconds: z.number().min(0).default(0) },
    taskSupport: 'required',
  },
  async ({ filename, delay_seconds }, { taskId, signal, extra, ask }) => {
    if (delay_seconds > 0) await sleep(delay_seconds * 1000, signal);
    const r = await ask({
      message: `Are you sure you want to delete '${filename}'?`,
      requestedSchema: { type: 'object', properties: { confirm: { type: 'boolean', title: 'Confirm' } }, required: ['confirm'] },
    });
    await backToWorking(extra, taskId, 'Input received');
    const ok = r.action === 'accept' && r.content?.confirm === true;
    return text(ok ? `Deleted '${filename}'` : `Deletion of '${filename}' cancelled (${r.action})`);
  },
);

// --- multi_input: two parallel elicitations -----------------------------------------------
registerTaskTool(
  'multi_input',
  { description: 'Asks two questions in parallel; completes when both are answered.', inputSchema: {}, taskSupport: 'required' },
  async (_args, { taskId, extra, ask }) => {
    const [a, b] = await Promise.all([
      ask({ message: 'What is your name?', requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } }),
      ask({ message: 'Proceed?', requestedSchema: { type: 'object', properties: { confirm: { type: 'boolean' } }, required: ['confirm'] } }),
    ]);
    await backToWorking(extra, taskId, 'All inputs received');
    return text(`name=${a.action === 'accept' ? a.content?.name : `<${a.action}>`}; confirm=${b.action === 'accept' ? b.content?.confirm : `<${b.action}>`}`);
  },
);

// --- test_tool_with_task: a question before the task exists ------------------------------
server.experimental.tasks.registerToolTask(
  'test_tool_with_task',
  { description: 'Asks for a name, then runs as a task that greets it.', inputSchema: {}, execution: { taskSupport: 'required' } },
  {
    async createTask(_args, extra) {
      // Not tied to a task (there is none yet): written at once, during the tools/call.
      const answer = await extra.sendRequest(
        { method: 'elicitation/create', params: { mode: 'form', message: 'What is your name?',
          requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } } },
        ElicitResultSchema,
      );
      const name = answer.action === 'accept' ? answer.content?.name : 'nobody';
      const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl ?? null, pollInterval: POLL_INTERVAL_MS });
      const snapshot = { ...task };
      setImmediate(() => extra.taskStore.storeTaskResult(task.taskId, 'completed', text(`Hello, ${name}!`)).catch(() => {}));
      return { task: snapshot };
    },
    getTask: async (_args, { taskId, taskStore: s }) => s.getTask(taskId),
    getTaskResult: async (_args, { taskId, taskStore: s }) => s.getTaskResult(taskId),
  },
);

await server.connect(new StdioServerTransport());
console.error('[legacy-tasks] ready on stdio');
