"""Names a spec's tools and tables may not take, because the exported tau2 runtime already uses them.

An exported domain becomes a toolkit class whose methods are the spec's tools, and a pydantic DB model whose
fields are its tables (``warehouse/tau2_package/template/runtime.py``). A tool named ``update_db`` or ``conn``,
or a table named ``dump`` or ``model_fields``, would replace the runtime's own member and the exported package
would not import (or would run the wrong code). The reserved sets are read from the runtime's source and from
the tau2 classes it derives from (parsed, never imported); where tau2's source is not installed, the members
of tau2 26.3's classes listed below stand in for it.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

RUNTIME = Path(__file__).resolve().parent.parent / "warehouse" / "tau2_package" / "template" / "runtime.py"
TOOLKIT_CLASS, DB_CLASS = "SpecToolKit", "DB"
# tau2 classes the runtime's toolkit and DB model derive from: (file inside the tau2 package, class)
TAU2_TOOLKIT_BASES = (("environment/toolkit.py", "ToolKitBase"),)
TAU2_DB_BASES = (("environment/db.py", "DB"), ("utils/pydantic_utils.py", "BaseModelNoExtra"))
# their members in tau2 26.3, for a machine without tau2's source
TAU2_TOOLKIT_FALLBACK = frozenset({"db", "tools", "use_tool", "get_tools", "has_tool", "tool_type",
                                   "get_statistics", "update_db", "get_db_hash"})
TAU2_DB_FALLBACK = frozenset({"load", "dump", "get_json_schema", "get_hash", "get_statistics", "model_config"})


def class_members(source: str, class_name: str) -> set[str]:
    """What a class in ``source`` defines: methods, class attributes (annotated or assigned), and the
    attributes its methods set on ``self``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.ClassDef) and node.name == class_name):
            continue
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(item.name)
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                names.add(item.target.id)
            elif isinstance(item, ast.Assign):
                names |= {t.id for t in item.targets if isinstance(t, ast.Name)}
        for inner in ast.walk(node):
            targets = inner.targets if isinstance(inner, ast.Assign) else \
                [inner.target] if isinstance(inner, (ast.AnnAssign, ast.AugAssign)) else []
            for target in targets:
                for part in ast.walk(target):
                    if isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name) and part.value.id == "self":
                        names.add(part.attr)
    return names


def _tau2_members(bases: tuple[tuple[str, str], ...], fallback: frozenset[str]) -> set[str]:
    from domains.external import package_dir

    folder = package_dir("tau2")
    names: set[str] = set()
    for relative, class_name in bases:
        path = folder / relative if folder is not None else None
        if path is None or not path.is_file():
            return set(fallback)
        names |= class_members(path.read_text(encoding="utf-8"), class_name)
    return names


@cache
def reserved_tool_names() -> frozenset[str]:
    """Names a tool may not have: the runtime toolkit's own members and those of tau2's ToolKitBase."""
    runtime = class_members(RUNTIME.read_text(encoding="utf-8"), TOOLKIT_CLASS)
    return frozenset(runtime | _tau2_members(TAU2_TOOLKIT_BASES, TAU2_TOOLKIT_FALLBACK) | set(dir(object)))


@cache
def reserved_table_names() -> frozenset[str]:
    """Names a table may not have: the members of the DB model it becomes a field of (tau2's DB, pydantic)."""
    from pydantic import BaseModel

    return frozenset(set(dir(BaseModel)) | _tau2_members(TAU2_DB_BASES, TAU2_DB_FALLBACK))


__all__ = ["class_members", "reserved_table_names", "reserved_tool_names"]
