"""Export a published snapshot for NeMo Gym: a resources server per domain with its task rows, or step rows.

``export_gym`` (``--format nemo-gym``) writes, per domain, a self-contained Gym resources server
(``warehouse/gym_package``) with its rows: ``responses_create_params`` (the system prompt with the policy, the
user's opening with everything the user would tell when asked, the tools) and ``task_id``, ``domain``, ``seed`` and
``split``. Gym's simple agent has no user turns, so the opening carries the user's facts; in a dual-control domain the
user's own device tools are offered too, and a call of one runs as the user's (the agent plays the user's hands).

``export_steps`` (``--format steps``) writes one row per gold step of the dialogue-oracle transcript (the episode
the HF export records): the conversation so far as Responses API input items, the tools, the ``expected_action``
(a function call with its arguments, or the final message with the values to communicate) and ``mutating``, in the
format of Gym's ``single_step_tool_use_with_argument_comparison`` server.

Both split tasks by ``train/environment/splits.py`` and write atomically (``warehouse/export_folder.py``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any

from domains.registry import get_engine, get_spec
from domains.spec import DomainSpec
from train.environment.env import EnvConfig, Environment, role_tools
from train.environment.policies import DialogueOracle
from train.environment.splits import snapshot_splits
from train.environment.tasks import TrainingTask, load_training_set
from train.environment.user_sim import ScriptedUser, first_person, opening_message
from warehouse.export_folder import check_export_target, staged_export
from warehouse.exports import policy_markdown
from warehouse.gym_package.build import server_name, write_gym_server
from warehouse.reader import WarehouseError, check_domains_known, connect_readonly, published_meta

STEPS_ENV = EnvConfig(subset_tools=False, show_prices=False)  # the HF export's episode: every tool, no prices
CLOSING = ("Work from what the user wrote: they are not available for questions during this conversation. Use the "
           "tools to find and change records as the policy allows; when you are done, reply once to the user with "
           "the result and every value they asked for.")
_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
_RESPONSE = re.compile(r"^<tool_response>\n(.*)\n</tool_response>$", re.S)


def system_prompt(spec: DomainSpec) -> str:
    return f"You are a customer-service agent. Follow this policy.\n\n{policy_markdown(spec)}\n{CLOSING}"


def opening(task: TrainingTask, dual: bool) -> str:
    """The user's first message with every fact they would give when asked (first person)."""
    facts = [first_person(f) for f in task.known_facts]
    text = opening_message(task)
    if facts:
        text += "\n\nWhat I can tell you: " + "; ".join(facts) + "."
    if dual:
        text += ("\n\nI have my phone with me: use the phone tools (marked as mine) and I will do exactly that on it.")
    return text


def function_tool(schema: dict[str, Any], user_side: bool = False) -> dict[str, Any]:
    """A tool as the Responses API lists it."""
    description = schema.get("description", "")
    if user_side:
        description = "(On the user's own phone: the user does this when you call it.) " + description
    return {"type": "function", "name": schema["name"], "description": description,
            "parameters": schema.get("parameters") or {"type": "object", "properties": {}}, "strict": False}


def row_tools(spec: DomainSpec, task: TrainingTask) -> list[dict[str, Any]]:
    """The agent tools the task's role may ask for (the gold's always), then the user's device tools."""
    allowed = role_tools(task)
    gold = [c.name for c in task.gold_calls if c.side == "agent"]
    names = None if allowed is None else set(allowed) | set(gold)
    tools = [function_tool(t.openai_schema()["function"]) for t in spec.side_tools("agent")
             if names is None or t.name in names]
    return tools + [function_tool(t.openai_schema()["function"], user_side=True) for t in spec.side_tools("user")]


def task_row(spec: DomainSpec, task: TrainingTask, split: str) -> dict[str, Any]:
    """One Gym row: what the policy model is sent, the task's identity, and the agent that runs it."""
    params = {"input": [{"role": "system", "content": system_prompt(spec), "type": "message"},
                        {"role": "user", "content": opening(task, spec.dual), "type": "message"}],
              "tools": row_tools(spec, task), "parallel_tool_calls": False, "tool_choice": "auto"}
    return {"responses_create_params": params, "task_id": task.task_id, "domain": task.domain, "seed": task.seed,
            "split": split, "agent_ref": {"type": "responses_api_agents",
                                          "name": f"{server_name(task.domain)}_simple_agent"}}


def contract(task: TrainingTask) -> dict[str, Any]:
    """What the server's /verify needs of a task: the gold, what must be said, and the stored contract."""
    v = task.verifiable()
    return {"task_id": task.task_id, "seed": task.seed, "gold_calls": [c.to_dict() for c in v.gold_calls],
            "communicate_info": list(v.communicate_info), **v.contract()}


def _tasks(warehouse_path: str | Path, snapshot: str) -> tuple[str, list[TrainingTask], dict[str, str], dict[str, Any]]:
    """The snapshot's tasks, each one's split, and its domains' (seed -> fingerprint)."""
    with closing(connect_readonly(warehouse_path)) as con:
        sid = published_meta(con, snapshot)["snapshot_id"]
        check_domains_known(con, sid)  # a user's own domain needs --domains-dir, said in one line
        domains = con.execute("SELECT domain, db_seed, spec_hash, fingerprint FROM domains WHERE snapshot_id = ?",
                              [sid]).fetchall()
        listed = con.execute("SELECT domain, db_seed, fingerprint FROM domain_databases WHERE snapshot_id = ?",
                             [sid]).fetchall()
        ids = [r[0] for r in con.execute("SELECT task_id FROM tasks WHERE snapshot_id = ?", [sid]).fetchall()]
        split = snapshot_splits(con, sid, ids)
    tasks = load_training_set(warehouse_path, sid).tasks if ids else []
    databases: dict[str, Any] = {d: {"spec_hash": h, "seeds": {}} for d, _, h, _ in domains}
    for d, seed, fp in listed or [(d, s, fp) for d, s, _, fp in domains]:
        databases[d]["seeds"][int(seed)] = fp
    return sid, tasks, {t.task_id: split.of(t.task_id) for t in tasks}, databases


def _images(sid: str, domain: str, info: dict[str, Any]) -> dict[int, bytes]:
    """Each seeded database image of ``domain``, refused if this code no longer builds the snapshot's state."""
    spec = get_spec(domain)
    if spec.spec_hash != info["spec_hash"]:
        raise WarehouseError(f"the {domain} spec changed since snapshot {sid} was built (spec hash "
                             f"{info['spec_hash']} then, {spec.spec_hash} now); export it with the code version "
                             "that built it")
    images = {}
    for seed, fingerprint in sorted(info["seeds"].items()):
        engine = get_engine(domain, seed)
        if engine.fingerprint != fingerprint:
            raise WarehouseError(f"the seeded {domain} database (seed {seed}) differs from the one snapshot {sid} "
                                 "was verified against; export it with the code version that built it")
        images[seed] = engine.image
    return images


def export_gym(warehouse_path: str | Path, snapshot: str, out_dir: str | Path,
               overwrite: bool = False) -> dict[str, Any]:
    """A NeMo Gym resources server per domain, with its rows split into train and test."""
    target = check_export_target(out_dir, overwrite=overwrite, warehouse=warehouse_path)
    sid, tasks, split_of, databases = _tasks(warehouse_path, snapshot)
    written: dict[str, Any] = {}
    with staged_export(target, {"format": "nemo-gym", "snapshot_id": sid}) as stage:
        for domain in sorted(databases):
            spec, mine = get_spec(domain), [t for t in tasks if t.domain == domain]
            rows: dict[str, list[dict[str, Any]]] = {"train": [], "test": []}
            for task in mine:
                rows[split_of[task.task_id]].append(task_row(spec, task, split_of[task.task_id]))
            info = write_gym_server(stage, spec, _images(sid, domain, databases[domain]),
                                    [contract(t) for t in mine], rows, policy_markdown(spec))
            written[domain] = {k: v.replace(str(stage), str(Path(out_dir))) if isinstance(v, str) else v
                               for k, v in info.items()}
    return {"snapshot_id": sid, "rows": len(tasks), "domains": written}


def oracle_messages(task: TrainingTask, env: Environment) -> tuple[list[dict[str, str]], list[dict[str, Any]], bool]:
    """The dialogue oracle's episode on ``task`` (train/environment/env.py): its messages, the tools listed, and
    whether it was solved."""
    session = env.start(task, ScriptedUser(task))
    try:
        result = session.play(DialogueOracle(task))
        schemas = session.catalog.schemas()
    finally:
        session.close()
    return result.messages, schemas, result.solved


def step_rows(task: TrainingTask, env: Environment, split: str) -> list[dict[str, Any]]:
    """One row per assistant turn of the oracle episode that makes a gold call or gives the final answer."""
    messages, schemas, solved = oracle_messages(task, env)
    spec = get_spec(task.domain)
    writes = {t.name for t in spec.tools if t.kind == "write"}
    tools = [function_tool(s) for s in schemas]
    items: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    pending: list[str] = []  # call ids of the last assistant turn, answered by the next tool response
    gold_step = 0
    for k, message in enumerate(messages):
        role, content = message["role"], message["content"]
        calls = [json.loads(c) for c in _CALL.findall(content)] if role == "assistant" else []
        response = _RESPONSE.match(content) if role == "user" else None
        if role == "assistant" and (calls or k == len(messages) - 1):
            base = {"task_id": task.task_id, "domain": task.domain, "seed": task.seed, "split": split,
                    "step": len(rows), "gold_step": gold_step if calls else None, "oracle_solved": solved}
            params = {"input": [dict(i) for i in items], "tools": tools, "parallel_tool_calls": False,
                      "tool_choice": "auto"}
            if calls:
                call = calls[0]
                expected = {"type": "function_call", "name": call["name"],
                            "arguments": json.dumps(call["arguments"], ensure_ascii=False)}
                rows.append({"responses_create_params": params, "expected_action": expected,
                             "mutating": call["name"] in writes, **base})
                gold_step += 1
            else:
                rows.append({"responses_create_params": params, "expected_action": {"type": "message",
                             "content": content}, "communicate_info": list(task.communicate_info),
                             "mutating": False, **base})
        if calls:
            pending = []
            for n, call in enumerate(calls):
                call_id = f"call_{k}_{n}"
                pending.append(call_id)
                items.append({"type": "function_call", "call_id": call_id, "name": call["name"],
                              "arguments": json.dumps(call["arguments"], ensure_ascii=False)})
        elif response is not None and pending:
            try:
                outputs = json.loads(response.group(1))
            except ValueError:  # cut at the observation limit: the text as the agent saw it
                outputs = [{"result": response.group(1)}] * len(pending)
            for call_id, output in zip(pending, outputs):
                items.append({"type": "function_call_output", "call_id": call_id,
                              "output": json.dumps(output.get("result"), ensure_ascii=False)})
            pending = []
        else:
            items.append({"role": role, "content": content, "type": "message"})
    return rows


def export_steps(warehouse_path: str | Path, snapshot: str, out_dir: str | Path,
                 overwrite: bool = False) -> dict[str, Any]:
    """Step rows per split and domain: ``<split>/<domain>.jsonl``; the summary counts rows and mutating ones."""
    target = check_export_target(out_dir, overwrite=overwrite, warehouse=warehouse_path)
    sid, tasks, split_of, _ = _tasks(warehouse_path, snapshot)
    env = Environment(STEPS_ENV)
    per_file: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for task in tasks:
        split = split_of[task.task_id]
        per_file.setdefault((split, task.domain), []).extend(step_rows(task, env, split))
    counts: dict[str, Counter[str]] = {}
    with staged_export(target, {"format": "steps", "snapshot_id": sid}) as stage:
        for (split, domain), rows in sorted(per_file.items()):
            (stage / split).mkdir(exist_ok=True)
            with (stage / split / f"{domain}.jsonl").open("w", encoding="utf-8") as fh:
                for row in rows:
                    fh.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
            c = counts.setdefault(domain, Counter())
            c["rows"] += len(rows)
            c["mutating"] += sum(r["mutating"] for r in rows)
            c[split] += len(rows)
    per_domain = {d: {**c, "mutating_share": round(c["mutating"] / c["rows"], 4) if c["rows"] else 0.0}
                  for d, c in sorted(counts.items())}
    return {"snapshot_id": sid, "rows": sum(c["rows"] for c in counts.values()), "tasks": len(tasks),
            "per_domain": per_domain}
