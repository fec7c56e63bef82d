"""server-everything's `simulate-research-query` (a tool that runs only as a task, ~4 s in
four stages, asking one elicitation tied to the task when `ambiguous`) run as a task by
the TypeScript SDK v2 client with @modelcontextprotocol/ext-tasks (clients/tasks_client.mjs)
along every road the gateway offers:

- `session`: a handshake-era client in a `serve` session: 2025-11-25 tasks pass through
  untouched (the client opens `tasks/result` when the task needs input, as the SDK server
  releases a task's questions only on it);
- `stateless`: a 2026-07-28 client through `serve`, which translates the tasks extension
  (`io.modelcontextprotocol/tasks`) to the child's 2025-11-25 tasks (flat CreateTaskResult,
  `tasks/get` inlining the result or the questions, `tasks/update`, `tasks/cancel`);
- `relay`: a handshake-era host spawning the relay (`mcp-stdio URL`) in front of `serve`:
  legacy host → relay → 2026-07-28 → serve → legacy child, the relay running the host's
  2025-11-25 tasks on the extension and putting the task's questions to the host itself.

On each road a task reaches `completed` with the research report, a cancelled one ends
`cancelled` as the server tells it, and the ambiguous one asks once, is answered (accept,
the first option) and completes with the answer in its report."""

import json
import subprocess
import threading

import pytest

from helpers.paths import CLIENT_SCRIPTS, NODE_BIN, NPM_BIN, relay_binary
from helpers.processes import node_env, start_serve, stop_serve

EVERYTHING = [str(NODE_BIN / "node"), str(NPM_BIN / "mcp-server-everything"), "stdio"]
CLIENT = CLIENT_SCRIPTS / "tasks_client.mjs"
CLIENT_TIMEOUT_S = 60

# How the client reaches server-everything on each road: its era and its transport.
ROADS = {
    "session": lambda url: ["--era", "legacy", "--url", url],
    "stateless": lambda url: ["--era", "2026-07-28", "--url", url],
    "relay": lambda url: ["--era", "legacy", "--stdio", relay_binary(), url],
}


class Served:
    """`serve` in front of server-everything, its log kept (and its pipe drained) for the
    failure messages."""

    def __init__(self):
        self.process, self.url = start_serve(EVERYTHING, env=node_env())
        self.log: list[str] = []
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()

    def _drain(self):
        for line in self.process.stderr:
            self.log.append(line.rstrip())

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log[-lines:])

    def stop(self) -> int:
        code = stop_serve(self.process)
        self.reader.join(timeout=5)
        return code


@pytest.fixture(scope="module")
def served():
    server = Served()
    yield server
    assert server.stop() == 0, server.tail()


def run_client(served: Served, road: str, scenario: str, *extra: str) -> dict:
    """Runs the client to its end (it bounds itself; the subprocess timeout is a backstop)
    and returns the JSON line it printed."""
    args = [str(NODE_BIN / "node"), str(CLIENT), "--scenario", scenario, "--timeout", str(CLIENT_TIMEOUT_S), *extra]
    args += ROADS[road](served.url)
    run = subprocess.run(args, env=node_env(), capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S + 30)
    context = f"client stderr:\n{run.stderr[-4000:]}\nserve log:\n{served.tail()}"
    assert run.returncode == 0, context
    lines = run.stdout.strip().splitlines()
    assert lines, context
    report = json.loads(lines[-1])
    report["context"] = context
    return report


def summary(report: dict) -> str:
    shown = {k: v for k, v in report.items() if k not in ("text", "context")}
    shown["text"] = (report.get("text") or "")[:200]
    return f"{json.dumps(shown, indent=1)}\n{report['context']}"


@pytest.mark.parametrize("road", sorted(ROADS))
def test_a_task_runs_to_completed_with_the_report(served, road):
    report = run_client(served, road, "complete")
    assert report["outcome"] == "completed", summary(report)
    assert report["status"] == "completed", summary(report)
    assert report["text"].startswith("# Research Report: python\n"), summary(report)
    assert "Stage 4: Generating report ✓" in report["text"], summary(report)
    assert report["statuses"][0] == "working" and report["statuses"][-1] == "completed", summary(report)
    assert report["asked"] == 0, summary(report)


@pytest.mark.parametrize("road", sorted(ROADS))
def test_a_cancelled_task_ends_cancelled(served, road):
    report = run_client(served, road, "cancel")
    assert report["outcome"] == "cancelled", summary(report)
    # What the server says after the cancel, not only what the client concluded.
    assert report["status"] == "cancelled", summary(report)
    assert report["statuses"][-1] == "cancelled", summary(report)
    assert "completed" not in report["statuses"], summary(report)
    assert report["text"] is None, summary(report)


@pytest.mark.parametrize("road", sorted(ROADS))
def test_a_task_that_asks_is_answered_and_completes(served, road):
    report = run_client(served, road, "ask")
    assert report["asked"] == 1, summary(report)
    answer = report["answers"][0]
    # The question was tied to the task (related-task `_meta`, or the task's inputRequests).
    assert answer["taskId"] == report["taskId"] and answer["scope"] == "task", summary(report)
    assert answer["content"] == {"interpretation": "programming"}, summary(report)
    assert "input_required" in report["statuses"], summary(report)
    assert report["outcome"] == "completed", summary(report)
    assert report["status"] == "completed", summary(report)
    assert report["text"].startswith("# Research Report: python (programming)\n"), summary(report)
    assert "- **Clarification**: programming" in report["text"], summary(report)


def test_the_relay_puts_the_question_to_the_host_without_tasks_result(served):
    """The relay follows the task itself: the question reaches a host that never opens
    `tasks/result` (ext-tasks only polls `tasks/get` until the task has ended)."""
    report = run_client(served, "relay", "ask", "--no-open-result")
    assert report["resultRequest"] == "not opened", summary(report)
    assert report["asked"] == 1, summary(report)
    assert report["answers"][0]["taskId"] == report["taskId"], summary(report)
    assert report["answers"][0]["delivery"] == "peer-request", summary(report)
    assert report["status"] == "completed", summary(report)
    assert "- **Clarification**: programming" in report["text"], summary(report)
    # Each change of status reached the host as notifications/tasks/status.
    assert {"input_required", "completed"} <= set(report["notifications"]), summary(report)
