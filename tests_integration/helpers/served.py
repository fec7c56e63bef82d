"""`mcp-stdio serve --config FILE` as a subprocess (its log drained all along), and the
`.mcp.json` Claude Code writes."""

import json
import re
import subprocess
import threading
import time

from helpers.paths import relay_binary


def claude_code_mcp_json(servers: dict) -> str:
    """What Claude Code writes to .mcp.json: JSON.stringify(config, null, 2) plus a newline."""
    entries = {name: {"type": "stdio", "command": command, "args": args, "env": env} for name, (command, args, env) in servers.items()}
    return json.dumps({"mcpServers": entries}, indent=2) + "\n"


class Served:
    def __init__(self, config_file, *flags):
        self.log = []
        self.process = subprocess.Popen(
            [relay_binary(), "serve", "--port", "0", "--log-level", "info", "--reload-grace", "2", *flags, "--config", str(config_file)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        for line in self.process.stderr:
            self.log.append(line)
            match = re.search(r" at (http://127\.0\.0\.1:\d+)/", line)
            if match:
                self.base = match.group(1)
                break
        else:
            raise RuntimeError("serve never printed its URL")
        # Drained all along, so serve never blocks on a full stderr pipe.
        threading.Thread(target=lambda: self.log.extend(iter(self.process.stderr.readline, "")), daemon=True).start()

    def read_log_until(self, needle: str, deadline_s: float = 20.0) -> str:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if any(needle in line for line in list(self.log)):
                return "".join(self.log)
            time.sleep(0.05)
        raise AssertionError(f"{needle!r} never logged: {''.join(self.log)}")

    def stop(self):
        self.process.terminate()
        return self.process.wait(timeout=15)
