"""``toolscale tools DOMAIN``: what a newcomer needs to try ``toolscale call``: each tool's parameters, one
example call checked to succeed on the seeded database, and a few real ids per table."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

SAMPLE_IDS = 3


@dataclass
class Parameter:
    name: str
    type: str
    required: bool


@dataclass
class ToolInfo:
    name: str
    kind: str
    description: str
    parameters: list[Parameter]
    example: dict[str, Any] | None  # arguments of a call that succeeds on the seeded database (seed given)
    side: str = "agent"  # who calls it: agent, user (on their own device) or setup (a task's initial state)


@dataclass
class DomainTools:
    domain: str
    seed: int
    tools: list[ToolInfo]
    sample_ids: dict[str, list[Any]] = field(default_factory=dict)  # table -> first few primary keys


def _type_of(schema: dict[str, Any]) -> str:
    kind = schema.get("type", "any")
    text = "|".join(kind) if isinstance(kind, list) else str(kind)
    if "enum" in schema:
        text += " (" + " | ".join(map(str, schema["enum"])) + ")"
    elif schema.get("format"):
        text += f" ({schema['format']})"
    return text


def describe(domain: str, seed: int = 0) -> DomainTools:
    """Read the spec and check every example it offers on a fresh copy of the seeded database."""
    from domains.registry import get_engine

    engine = get_engine(domain, seed)
    spec = engine.spec
    tools = []
    for tool in spec.tools:
        props = tool.parameters.get("properties", {})
        required = set(tool.parameters.get("required", []))
        params = [Parameter(name, _type_of(schema), name in required) for name, schema in props.items()]
        example = None
        side = "setup" if tool.setup else tool.side
        for ex in tool.examples:
            if ex.get("expect") != "ok":
                continue
            with engine.fresh() as db:
                if db.call(tool.name, ex["arguments"], side).ok:
                    example = dict(ex["arguments"])
                    break
        tools.append(ToolInfo(tool.name, tool.kind, tool.description, params, example, side))
    samples = {}
    with engine.fresh() as db:
        for table in spec.tables:
            rows = db.query(f"SELECT {table.primary_key} FROM {table.name} ORDER BY {table.primary_key} "
                            f"LIMIT {SAMPLE_IDS}")
            samples[table.name] = [r[0] for r in rows]
    return DomainTools(domain, seed, tools, samples)


def render(info: DomainTools) -> str:
    """The human listing; ``--json`` prints ``asdict(info)`` instead."""
    lines = [f"{info.domain}: {len(info.tools)} tools (seed {info.seed})", ""]
    for tool in info.tools:
        params = ", ".join(f"{p.name}: {p.type}{'' if p.required else ' (optional)'}" for p in tool.parameters)
        whose = "" if tool.side == "agent" else f", {tool.side}"
        lines.append(f"{tool.name} [{tool.kind}{whose}]  {params or '(no parameters)'}")
        lines.append(f"    {tool.description.strip().splitlines()[0] if tool.description.strip() else ''}")
        if tool.example is not None:
            args = json.dumps(tool.example, ensure_ascii=False)
            seed = f" --seed {info.seed}" if info.seed else ""
            lines.append(f"    try: toolscale call {info.domain} {tool.name} --args '{args}'{seed}")
    lines += ["", "sample ids (first few rows of each table):"]
    lines += [f"  {table:<24}{', '.join(map(str, ids))}" for table, ids in info.sample_ids.items()]
    return "\n".join(lines)


def as_json(info: DomainTools) -> str:
    return json.dumps(asdict(info), indent=2, ensure_ascii=False, default=str)
