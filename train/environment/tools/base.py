"""The one tool interface every orchestrator tool implements, and the catalog that shows them to a model.

A tool has a name, a description and a JSON parameter schema; ``call(arguments)`` returns a ``ToolResult``
(observation, cost, latency, error) and never raises: bad arguments, unknown tools and crashes inside a tool
all come back as error results the agent reads.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from domains.engine import ArgumentValidator


@dataclass(frozen=True)
class ToolResult:
    observation: str  # what the agent sees
    cost_usd: float = 0.0
    latency_s: float = 0.0
    error: str | None = None  # one line; None when the call succeeded

    @property
    def ok(self) -> bool:
        return self.error is None


def error_result(message: str, latency_s: float = 0.0) -> ToolResult:
    return ToolResult(json.dumps({"error": message}, ensure_ascii=False), 0.0, latency_s, message)


class Tool(ABC):
    """Subclasses set ``name``, ``description`` and ``parameters`` and implement ``invoke``; ``call`` adds
    argument validation, timing and the never-raise guarantee."""

    name: str
    description: str
    parameters: dict[str, Any]
    validate_arguments: bool = True  # False when ``invoke`` validates itself (the domain engine does)

    def schema(self) -> dict[str, Any]:
        """The entry the system prompt shows for this tool."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    @abstractmethod
    def invoke(self, arguments: dict[str, Any]) -> ToolResult:
        """Do the work for valid arguments; may raise (``call`` turns that into an error result)."""

    def call(self, arguments: Any) -> ToolResult:
        start = time.perf_counter()
        try:
            if not isinstance(arguments, dict):
                return error_result(f"{self.name}: arguments must be a JSON object, got {type(arguments).__name__}",
                                    time.perf_counter() - start)
            if self.validate_arguments:
                problem = self._argument_problem(arguments)
                if problem:
                    return error_result(problem, time.perf_counter() - start)
            result = self.invoke(arguments)
        except Exception as exc:  # errors are data: a tool bug must not end the episode
            return error_result(f"{self.name}: {type(exc).__name__}: {exc}", time.perf_counter() - start)
        if result.latency_s:
            return result
        return ToolResult(result.observation, result.cost_usd, time.perf_counter() - start, result.error)

    def argument_problem(self, arguments: dict[str, Any]) -> str | None:
        """What is wrong with ``arguments`` against the schema (one line), or None; the episode counts it as a
        format error before calling."""
        return self._argument_problem(arguments)

    def _argument_problem(self, arguments: dict[str, Any]) -> str | None:
        validator = getattr(self, "_validator", None)
        if validator is None:
            validator = self._validator = ArgumentValidator(self.parameters)
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))
        if not errors:
            return None
        e = errors[0]
        where = f"argument {'.'.join(map(str, e.path))!r}" if e.path else "arguments"
        return f"{self.name}: invalid {where}: {e.message[:200]}"


class ToolCatalog:
    """The tools one episode offers, by name, in a fixed order."""

    def __init__(self, tools: Iterable[Tool] = ()):
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"duplicate tool name {tool.name!r}")
        self._tools[tool.name] = tool

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        return [t.schema() for t in self._tools.values()]

    def render(self) -> str:
        """The JSON list of tool schemas, as the system prompt shows it."""
        return json.dumps(self.schemas(), ensure_ascii=False)

    def call(self, name: Any, arguments: Any) -> ToolResult:
        """Call a tool by name; an unknown name is an error result naming the known ones."""
        tool = self._tools.get(name) if isinstance(name, str) else None
        if tool is None:
            return error_result(f"unknown tool {name!r}; available: {', '.join(self._tools)}")
        return tool.call(arguments)
