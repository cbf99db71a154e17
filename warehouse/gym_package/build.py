"""Write one domain's NeMo Gym resources server: the server, its runtime, the domain's data, the rows and the config.

Layout under the export folder (Gym's own, so ``ng_run`` finds the server from that folder):
``resources_servers/toolscale_<domain>/`` holds ``app.py`` (template/app.py), ``toolscale_env/`` (the runtime,
template/toolscale_env/runtime.py, beside verbatim copies of the project's ``domains/arguments.py``,
``domains/sqlguard.py``, ``verifiers/words.py`` and ``verifiers/values.py``), ``data/`` (``domain.json``,
``db_<seed>.sqlite`` per database,
``tasks.json``: the verification contracts, ``policy.md``, ``train.jsonl``, ``test.jsonl``, ``example.jsonl``),
``configs/toolscale_<domain>.yaml`` and ``requirements.txt``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from domains.spec import DomainSpec

TEMPLATE_DIR = Path(__file__).resolve().parent / "template"
ROOT = Path(__file__).resolve().parents[2]
# the project's own modules the runtime runs unchanged (standard library only), copied at export time
VENDORED = {"arguments.py": ROOT / "domains" / "arguments.py", "sqlguard.py": ROOT / "domains" / "sqlguard.py",
            "words.py": ROOT / "verifiers" / "words.py", "values.py": ROOT / "verifiers" / "values.py"}
# the one project import inside them, made relative to the shipped package
IMPORTS = {"from verifiers.words import find_word": "from .words import find_word"}
LICENSE = "Creative Commons Attribution 4.0 International"  # the HF export's cc-by-4.0, as Gym names it
MAX_STEPS = 30  # the simple agent's model calls per rollout


def server_name(domain: str) -> str:
    return f"toolscale_{domain}"


def domain_data(spec: DomainSpec, seeds: list[int]) -> dict[str, Any]:
    """The spec as the runtime needs it: tables (keys and their format), tools (SQL, sides, computed and generated
    parameters), assertions, the clock, and the seeds of the databases shipped beside it."""
    tables = []
    for t in spec.tables:
        key = t.column(t.primary_key)
        assert key is not None  # the spec loader checks that the key is a column
        tables.append({"name": t.name, "primary_key": t.primary_key, "side": t.side,
                       "key": {"type": key.type, "prefix": key.seed.get("prefix", ""),
                               "width": key.seed.get("width", 4)}})
    tools = [{
        "name": t.name, "kind": t.kind, "description": t.description, "parameters": t.parameters,
        "preconditions": [{"sql": p.sql, "error": p.error, "expect": p.expect, "enforced_by": p.enforced_by}
                          for p in t.preconditions],
        "effects": list(t.effects), "returns": {"sql": t.returns_sql, "mode": t.returns_mode},
        "computed": {k: list(v) for k, v in t.computed.items()}, "generated": dict(t.generated),
        "side": t.side, "setup": t.setup,
    } for t in spec.tools]
    assertions = [{"name": a.name, "side": a.side, "sql": a.sql, "parameters": dict(a.parameters)}
                  for a in spec.assertions.values()]
    return {"name": spec.name, "now": spec.now, "spec_hash": spec.spec_hash, "seeds": seeds, "tables": tables,
            "tools": tools, "assertions": assertions}


def write_runtime(folder: Path) -> None:
    """``toolscale_env/``: the runtime and the project modules it imports, as one package."""
    pkg = folder / "toolscale_env"
    pkg.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(TEMPLATE_DIR / "toolscale_env" / "runtime.py", pkg / "runtime.py")
    for name, source in VENDORED.items():
        text = source.read_text(encoding="utf-8")
        for absolute, relative in IMPORTS.items():
            text = text.replace(absolute, relative)
        if "from domains" in text or "from verifiers" in text or "import verifiers" in text:
            raise RuntimeError(f"{source} imports the project; the Gym runtime could not run it on its own")
        (pkg / name).write_text(text, encoding="utf-8")
    (pkg / "__init__.py").write_text('"""The ToolScale environment runtime (sessions, tool calls, verify)."""\n',
                                     encoding="utf-8")


def write_gym_server(out: Path, spec: DomainSpec, images: dict[int, bytes], contracts: list[dict[str, Any]],
                     rows: dict[str, list[dict[str, Any]]], policy: str) -> dict[str, Any]:
    """Write the domain's server under ``out/resources_servers/toolscale_<domain>``; returns what was written."""
    name = server_name(spec.name)
    folder = out / "resources_servers" / name
    data = folder / "data"
    data.mkdir(parents=True)
    (folder / "configs").mkdir()
    shutil.copyfile(TEMPLATE_DIR / "app.py", folder / "app.py")
    write_runtime(folder)
    _write_json(data / "domain.json", domain_data(spec, sorted(images)))
    for seed, image in images.items():
        (data / f"db_{seed}.sqlite").write_bytes(image)
    _write_json(data / "tasks.json", contracts)
    (data / "policy.md").write_text(policy, encoding="utf-8")
    for split, split_rows in (*rows.items(), ("example", rows.get("train", [])[:5])):
        _write_jsonl(data / f"{split}.jsonl", split_rows)
    (folder / "requirements.txt").write_text("nemo-gym\njsonschema\n", encoding="utf-8")
    config = folder / "configs" / f"{name}.yaml"
    config.write_text(gym_config(spec.name), encoding="utf-8")
    return {"server": str(folder), "config": str(config), "tasks": len(contracts),
            "rows": {split: len(r) for split, r in rows.items()}, "databases": sorted(images)}


def gym_config(domain: str) -> str:
    """Gym's config for the server and a simple agent on it; the model server (``policy_model``) comes from Gym's
    own configs (``responses_api_models/vllm_model/configs/vllm_model.yaml``)."""
    name = server_name(domain)
    path = f"resources_servers/{name}/data"
    datasets = []
    for split, kind in (("example", "example"), ("train", "train"), ("test", "validation")):
        datasets += [f"      - name: {split}", f"        type: {kind}", f"        jsonl_fpath: {path}/{split}.jsonl"]
        if kind != "example":
            datasets += [f"        license: {LICENSE}", "        huggingface_identifier:",
                         f"          repo_id: <your-org>/{name}  # fill in: where you publish the rows",
                         f"          artifact_fpath: {split}.jsonl"]
    return "\n".join([
        f"# NeMo Gym config of the ToolScale domain {domain!r} (written by toolscale export --format nemo-gym).",
        f"{name}:", "  resources_servers:", f"    {name}:", "      entrypoint: app.py", "      domain: agent",
        "      verified: false",
        f"      description: ToolScale {domain} - real database, replayed gold, the ToolScale verifier as reward",
        "      max_calls: 800  # per session, as the project's episode (50 turns x 16); further calls are refused",
        "      max_session_s: 300",
        "      max_idle_s: 300  # a session idle this long (never verified) is reaped", "      max_sessions: 256",
        f"{name}_simple_agent:", "  responses_api_agents:", "    simple_agent:", "      entrypoint: app.py",
        "      resources_server:", "        type: resources_servers", f"        name: {name}",
        "      model_server:", "        type: responses_api_models", "        name: policy_model",
        f"      max_steps: {MAX_STEPS}", "      datasets:", *datasets, ""])


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, ensure_ascii=False, indent=1, default=str) + "\n", encoding="utf-8")


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
