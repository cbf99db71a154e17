"""The domain's own tools (a ``domains.engine.Database``) behind the tool interface, optionally limited to
the tools a task's user role may ask for."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from domains.engine import Database
from domains.spec import Tool as SpecTool
from train.environment.tools.base import Tool, ToolResult


class DomainTool(Tool):
    """One spec tool executed on a live database; free, latency measured."""

    validate_arguments = False  # the engine validates against the same schema and words its own errors

    def __init__(self, db: Database, spec_tool: SpecTool):
        self.db = db
        self.name = spec_tool.name
        self.description = spec_tool.description
        self.parameters = spec_tool.parameters
        self.kind = spec_tool.kind  # "read" | "write"

    def argument_problem(self, arguments: dict[str, Any]) -> str | None:
        return self.db.engine.argument_problem(self.name, arguments)

    def invoke(self, arguments: dict[str, Any]) -> ToolResult:
        result = self.db.call(self.name, arguments)
        return ToolResult(result.to_json(), 0.0, 0.0, None if result.ok else (result.error or "call failed"))


def domain_tools(db: Database, allowed: Iterable[str] | None = None) -> list[DomainTool]:
    """The database's agent tools in spec order (a dual-control domain's user and setup tools are not the agent's);
    with ``allowed``, only those (an unknown name is a ValueError)."""
    spec_tools = db.engine.spec.side_tools("agent")
    if allowed is None:
        return [DomainTool(db, t) for t in spec_tools]
    wanted = set(allowed)
    unknown = sorted(wanted - {t.name for t in spec_tools})
    if unknown:
        raise ValueError(f"allow-list names tools that domain {db.engine.spec.name!r} lacks: {', '.join(unknown)}")
    return [DomainTool(db, t) for t in spec_tools if t.name in wanted]
