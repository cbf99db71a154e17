"""The code interpreter tool: the agent's Python runs in the sandbox (train/environment/tools/sandbox.py); stdout is the
observation, and a failure or a tripped limit is the error."""

from __future__ import annotations

import json
from typing import Any

from train.environment.tools.base import Tool, ToolResult
from train.environment.tools.sandbox import SandboxLimits, run_python

MAX_CODE_CHARS = 20_000


class CodeInterpreterTool(Tool):
    """Runs a Python 3 program (standard library only) with no network and no access to the project."""

    name = "code_interpreter"
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "code": {"type": "string", "maxLength": MAX_CODE_CHARS,
                     "description": "A complete Python 3 program; print what you want to see."},
        },
        "required": ["code"],
        "additionalProperties": False,
    }

    def __init__(self, limits: SandboxLimits = SandboxLimits()):
        self.limits = limits
        self.description = (
            "Run a Python 3 program (standard library only, no network, no files but its own scratch folder) "
            f"and see what it prints. Limits: {limits.wall_s:g} s wall time, {limits.cpu_s} s CPU, "
            f"{limits.memory_mb} MB memory, {limits.output_bytes // 1024} KB output.")

    def invoke(self, arguments: dict[str, Any]) -> ToolResult:
        run = run_python(arguments["code"], self.limits)
        if run.error is None:
            return ToolResult(run.stdout, 0.0, run.wall_s)
        observation = {"error": run.error, "stdout": run.stdout[-2_000:], "stderr": run.stderr[-2_000:]}
        return ToolResult(json.dumps(observation, ensure_ascii=False), 0.0, run.wall_s, run.error)
