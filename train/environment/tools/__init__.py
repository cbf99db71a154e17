"""Tools an orchestrator calls during an episode, behind one interface (see docs/tools.md)."""

from train.environment.tools.base import Tool, ToolCatalog, ToolResult, error_result
from train.environment.tools.code import CodeInterpreterTool
from train.environment.tools.domain import DomainTool, domain_tools
from train.environment.tools.sandbox import SandboxLimits, SandboxRun, run_python
from train.environment.tools.search import LocalSearchTool, domain_index

__all__ = ["CodeInterpreterTool", "DomainTool", "LocalSearchTool", "SandboxLimits", "SandboxRun", "Tool",
           "ToolCatalog", "ToolResult", "domain_index", "domain_tools", "error_result", "run_python"]
