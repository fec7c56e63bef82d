"""A stdio MCP server (Python SDK mcp 2.3.0, both protocol eras: it answers `server/discover`)
that implements the 2026-07-28 tasks extension, `io.modelcontextprotocol/tasks` (SEP-2663),
itself, through the SDK's extension API (`mcp.server.extension.Extension`), and exposes the
tools the official conformance suite's `tasks-*` scenarios call. test_conformance_tasks.py
runs the suite through `mcp-stdio serve` in front of it: the gateway probes it as a
2026-07-28 server and passes the extension through (after its own header and envelope
checks), so what the suite judges is that passthrough."""

import secrets
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

import anyio
from anyio.abc import TaskGroup
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, Extension, MCPServer, MethodBinding, ToolBinding, require_client_extension
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict

TASKS = "io.modelcontextprotocol/tasks"
MODERN = "2026-07-28"
TTL_MS = 3_600_000  # completed tasks stay readable for an hour
POLL_MS = 200

Support = Literal["optional", "required"]
TERMINAL = ("completed", "failed", "cancelled")


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# --- the extension's method params --------------------------------------------------------
# Subclasses of RequestParams, so `_meta` parses like on every other request. Input
# responses stay raw JSON: tasks/update must ack (and ignore) keys it never asked for and
# entries that are not valid responses, which typed params would reject as -32602 first.


class TaskIdParams(types.RequestParams):
    task_id: str


class TaskUpdateParams(TaskIdParams):
    model_config = ConfigDict(extra="ignore")
    input_responses: dict[str, Any] | None = None


# --- one task ---------------------------------------------------------------------------------


@dataclass
class Task:
    id: str
    status: str = "working"
    created_at: str = field(default_factory=now_iso)
    last_updated_at: str = ""
    expires_at: float = 0.0
    result: dict | None = None
    error: dict | None = None
    # The questions still open (key -> input request) and the answers gathered so far.
    pending: dict[str, dict] = field(default_factory=dict)
    answers: dict[str, dict] = field(default_factory=dict)
    answered: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)

    def __post_init__(self) -> None:
        self.last_updated_at = self.created_at
        self.expires_at = anyio.current_time() + TTL_MS / 1000

    def move(self, status: str) -> None:
        self.status = status
        self.last_updated_at = now_iso()

    def envelope(self) -> dict:
        """The flat task fields shared by CreateTaskResult and tasks/get."""
        return {
            "taskId": self.id,
            "status": self.status,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.last_updated_at,
            "ttlMs": TTL_MS,
            "pollIntervalMs": POLL_MS,
        }


# The task a tool body runs in, so `ask()` knows which task to park.
current_task: ContextVar[Task] = ContextVar("current_task")


@dataclass(frozen=True)
class TaskTool:
    support: Support
    # True: the tool gathers its input through ordinary MRTR rounds first (the SDK's
    # InputRequiredResult), and only the call that brings the answers becomes a task.
    asks_first: bool = False


class TasksExtension(Extension):
    """SEP-2663, server side: server-directed task creation on `tools/call` for clients
    that opted in on that request, and `tasks/get`, `tasks/update`, `tasks/cancel`."""

    identifier = TASKS

    def __init__(self) -> None:
        self.tasks: dict[str, Task] = {}
        self.policies: dict[str, TaskTool] = {}
        self._bindings: list[ToolBinding] = []
        self._group: TaskGroup | None = None

    # -- contributions -------------------------------------------------------------------------

    def tool(self, support: Support, *, asks_first: bool = False, **kwargs: Any):
        """Registers a tool that may (optional) or must (required) run as a task."""

        def decorator(fn):
            self.policies[kwargs.get("name", fn.__name__)] = TaskTool(support, asks_first)
            self._bindings.append(ToolBinding(fn=fn, kwargs=kwargs))
            return fn

        return decorator

    def tools(self) -> list[ToolBinding]:
        return self._bindings

    def methods(self) -> list[MethodBinding]:
        # Bound to the 2026-07-28 era only: on a handshake connection tasks/* are the
        # 2025-11-25 core methods, which this server does not serve (-32601 there).
        era = frozenset({MODERN})
        return [
            MethodBinding("tasks/get", TaskIdParams, self.get, era),
            MethodBinding("tasks/update", TaskUpdateParams, self.update, era),
            MethodBinding("tasks/cancel", TaskIdParams, self.cancel, era),
        ]
        # tasks/result and tasks/list are gone in SEP-2663: left unbound, they are -32601.

    @asynccontextmanager
    async def running(self, _server: MCPServer):
        """The server lifespan: tasks outlive the request that created them, so they run
        in this task group; leaving it (stdin closed) cancels whatever still runs."""
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                yield {}
            finally:
                group.cancel_scope.cancel()

    # -- tools/call ------------------------------------------------------------------------------

    async def intercept_tool_call(self, params: types.CallToolRequestParams, ctx: ServerRequestContext, call_next):
        policy = self.policies.get(params.name)
        # Not a task tool (greet): runs as usual. A legacy `task` param is ignored: in the
        # extension the server decides, the client only opts in.
        if policy is None:
            return await call_next(ctx)
        if not opted_in(ctx):
            if policy.support == "required":
                require_client_extension(ctx, TASKS)  # raises -32021 with requiredCapabilities
            return await call_next(ctx)  # optional: plain synchronous call
        if policy.asks_first and not params.input_responses:
            return await call_next(ctx)  # MRTR round before the task exists
        return self.start(ctx, call_next)

    def start(self, ctx: ServerRequestContext, call_next) -> dict:
        """Creates the task (stored before the reply, so an immediate tasks/get finds it)
        and runs the tool in the background."""
        self.prune()
        task = Task(id=f"task-{secrets.token_hex(8)}")
        self.tasks[task.id] = task
        assert self._group is not None, "the server lifespan is not running"
        self._group.start_soon(self.run, task, ctx, call_next)
        return {"resultType": "task", **task.envelope()}

    async def run(self, task: Task, ctx: ServerRequestContext, call_next) -> None:
        current_task.set(task)
        outcome: types.CallToolResult | types.InputRequiredResult | dict | None = None
        failure: MCPError | None = None
        with task.scope:
            try:
                outcome = await call_next(ctx)
            except MCPError as exc:
                failure = exc  # a protocol error: the task fails with it
            except Exception as exc:  # noqa: BLE001 - the task records it, nothing else does
                failure = MCPError(types.INTERNAL_ERROR, f"tool crashed: {exc}")
        if task.status in TERMINAL:  # cancelled meanwhile: the cancel already settled it
            return
        if isinstance(outcome, types.InputRequiredResult):
            # Only asks_first tools use MRTR, and their task starts with the answers in hand.
            failure = MCPError(types.INVALID_PARAMS, "the call did not answer the tool's input requests")
        if failure is not None:
            task.error = {"code": failure.code, "message": failure.message}
            if failure.data is not None:
                task.error["data"] = failure.data
            task.move("failed")
            return
        # A tool error (isError) is still a completed task: the result carries it.
        task.result = outcome.model_dump(by_alias=True, mode="json", exclude_none=True) if hasattr(outcome, "model_dump") else dict(outcome or {})
        task.result.pop("resultType", None)
        task.move("completed")

    # -- tasks/* ---------------------------------------------------------------------------------

    def find(self, ctx: ServerRequestContext, task_id: str) -> Task:
        # The opt-in gate comes first: a client that did not declare the extension learns
        # that (-32021), not whether some task id exists.
        require_client_extension(ctx, TASKS)
        self.prune()
        task = self.tasks.get(task_id)
        if task is None:
            raise MCPError(types.INVALID_PARAMS, f"unknown task: {task_id}")
        return task

    async def get(self, ctx: ServerRequestContext, params: TaskIdParams) -> dict:
        task = self.find(ctx, params.task_id)
        # `complete` for every status: this request is done; the task's state is inside.
        body = {"resultType": "complete", **task.envelope()}
        if task.status == "input_required":
            body["inputRequests"] = dict(task.pending)
        elif task.status == "completed":
            body["result"] = task.result
        elif task.status == "failed":
            body["error"] = task.error
        return body

    async def update(self, ctx: ServerRequestContext, params: TaskUpdateParams) -> dict:
        task = self.find(ctx, params.task_id)
        # Applied before the ack, so the next tasks/get already shows what is still open.
        for key, response in (params.input_responses or {}).items():
            if key in task.pending and isinstance(response, dict):
                task.answers[key] = response
                del task.pending[key]
        if task.status == "input_required" and not task.pending:
            task.move("working")
            task.answered.set()
        return {"resultType": "complete"}

    async def cancel(self, ctx: ServerRequestContext, params: TaskIdParams) -> dict:
        task = self.find(ctx, params.task_id)
        # Idempotent: cancelling a finished task acknowledges and changes nothing.
        if task.status not in TERMINAL:
            task.move("cancelled")
            task.scope.cancel()
        return {"resultType": "complete"}

    def prune(self) -> None:
        """Forgets tasks whose ttl (counted from creation) has run out."""
        clock = anyio.current_time()
        for task_id in [t.id for t in self.tasks.values() if t.expires_at <= clock]:
            del self.tasks[task_id]

    def advertise_task_support(self):
        """Server middleware: stamps `execution.taskSupport` on the task tools in tools/list,
        which the SDK's 2026-07-28 tools/list shape does not carry, so it goes on after."""

        async def middleware(ctx: ServerRequestContext, call_next):
            result = await call_next(ctx)
            if ctx.method == "tools/list" and isinstance(result, dict):
                for tool in result.get("tools", []):
                    policy = self.policies.get(tool.get("name"))
                    tool["execution"] = {"taskSupport": policy.support if policy else "forbidden"}
            return result

        return middleware


def opted_in(ctx: ServerRequestContext) -> bool:
    """This request declared the extension. On 2026-07-28 the SDK builds the session's
    client capabilities from this request's `_meta` (a per-request opt-in)."""
    if ctx.protocol_version != MODERN:
        return False  # a handshake-era wire has no CreateTaskResult
    declared = ctx.session.client_capabilities
    return bool(declared and declared.extensions and TASKS in declared.extensions)


async def ask(requests: dict[str, dict]) -> dict[str, dict]:
    """From inside a task: parks it in `input_required` with `requests` until tasks/update
    has answered every key (partial answers leave the rest open), then returns the answers."""
    task = current_task.get()
    task.pending, task.answers, task.answered = dict(requests), {}, anyio.Event()
    task.move("input_required")
    await task.answered.wait()
    return task.answers


def elicit(message: str, schema: dict) -> dict:
    return {"method": "elicitation/create", "params": {"mode": "form", "message": message, "requestedSchema": schema}}


def text(value: str, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=value)], is_error=is_error)


NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
CONFIRM_SCHEMA = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}

tasks = TasksExtension()


# --- the suite's fixtures ---------------------------------------------------------------------


@tasks.tool("optional")
async def slow_compute(seconds: float = 1, label: str = "") -> str:
    """Sleeps `seconds`, then reports; a task for clients that opted in."""
    await anyio.sleep(seconds)
    return f"{label or 'slow_compute'}: done after {seconds}s"


@tasks.tool("required")
async def failing_job() -> types.CallToolResult:
    """Always a task; ends completed with a tool error (isError), not failed."""
    await anyio.sleep(1)
    return text("failing_job failed on purpose", is_error=True)


@tasks.tool("optional")
async def protocol_error_job() -> str:
    """A task that fails with a JSON-RPC error (status failed, `error` inlined)."""
    await anyio.sleep(0.5)
    raise MCPError(types.INTERNAL_ERROR, "protocol_error_job failed on purpose", {"job": "protocol_error_job"})


@tasks.tool("required")
async def confirm_delete(filename: str) -> str:
    """A task that asks for confirmation (input_required) before it finishes."""
    answers = await ask({"confirm": elicit(f"Delete {filename}?", CONFIRM_SCHEMA)})
    confirmed = (answers["confirm"].get("content") or {}).get("confirm") is True
    return f"{'Deleted' if confirmed else 'Kept'} {filename}"


@tasks.tool("required")
async def multi_input() -> str:
    """A task that asks two questions at once; they may be answered one at a time."""
    answers = await ask({
        "name": elicit("What is your name?", NAME_SCHEMA),
        "confirm": elicit("Shall I proceed?", CONFIRM_SCHEMA),
    })
    name = (answers["name"].get("content") or {}).get("name", "")
    return f"Got both answers (name={name})"


@tasks.tool("required", asks_first=True)
async def test_tool_with_task(ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
    """MRTR before the task: round 1 asks the user's name (InputRequiredResult, no task);
    round 2 carries the answer and becomes a task that greets them."""
    responses = ctx.input_responses or {}
    if ctx.request_state != "ask-name" or "user_name" not in responses:
        request = elicit("What is your name?", NAME_SCHEMA)
        return types.InputRequiredResult.model_validate({"resultType": "input_required", "inputRequests": {"user_name": request}, "requestState": "ask-name"})
    answer = responses["user_name"].model_dump(by_alias=True, exclude_none=True)
    await anyio.sleep(0.5)
    return text(f"Hello, {(answer.get('content') or {}).get('name', 'stranger')}!")


server = MCPServer("extension-tasks-fixture", version="1.0.0", extensions=[tasks], lifespan=tasks.running, middleware=[tasks.advertise_task_support()])


@server.tool()
def greet(name: str) -> str:
    """Never a task."""
    return f"Hello, {name}!"


if __name__ == "__main__":
    # The SDK's default stdio loop serves both eras; the first request picks one.
    server.run("stdio")
