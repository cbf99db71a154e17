"""Which ``checkpoint-N`` folders of a training run are complete, and setting aside the ones a kill left half-written.

The installed transformers Trainer (``Trainer._save_checkpoint``) writes a checkpoint in this order: the model
(``config.json``, ``generation_config.json``, ``model.safetensors`` or its shards and index), the tokenizer files,
``training_args.bin``; then ``optimizer.pt`` and ``scheduler.pt`` (under DeepSpeed a ``global_stepN/`` folder
instead), ``scaler.pt`` if any, ``rng_state.pth`` (``rng_state_<rank>.pth`` with several processes); and
``trainer_state.json`` last. None of these writes is atomic, so a kill mid-save leaves a folder with some files
missing and the one being written cut short. A folder is complete when ``trainer_state.json`` parses and names its
step, and every file that resuming reads is present and whole (a safetensors file exactly as long as its header
says, a torch file with its zip directory intact, JSON that parses).

Incomplete folders are renamed to ``checkpoint-N.incomplete-<UTC time>`` inside ``<output_dir>/incomplete/``, not
beside the others: the Trainer's checkpoint rotation deletes every ``<output_dir>/checkpoint-*`` folder beyond
``save_total_limit``, a renamed one included, and nothing set aside may be lost.
"""

from __future__ import annotations

import json
import re
import struct
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

CHECKPOINT_NAME = re.compile(r"^checkpoint-(\d+)$")
SET_ASIDE_DIR = "incomplete"
SET_ASIDE_MARK = ".incomplete-"
# a safetensors header larger than this is not a header but garbage (real ones are kilobytes to a few megabytes)
MAX_HEADER_BYTES = 100_000_000
TRAINER_FILES = ("trainer_state.json", "training_args.bin", "optimizer.pt", "scheduler.pt")


@dataclass
class CheckpointState:
    """One ``checkpoint-N`` folder and what keeps it from being resumed or evaluated (nothing when complete)."""

    path: Path
    step: int
    problems: list[str]

    @property
    def complete(self) -> bool:
        return not self.problems


@dataclass
class SetAside:
    """An incomplete checkpoint moved out of the way: where it was, where it is now, what was wrong."""

    original: Path
    moved_to: Path
    problems: list[str]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def _json_problem(path: Path) -> str | None:
    try:
        json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return f"{path.name} is not valid JSON (cut short?)"
    return None


def safetensors_problem(path: Path) -> str | None:
    """None when the file is as long as its header says; a safetensors file cut short is shorter than that."""
    size = path.stat().st_size
    try:
        with path.open("rb") as f:
            head = f.read(8)
            if len(head) < 8:
                return f"{path.name} is truncated ({size} bytes, not even a header)"
            (header_len,) = struct.unpack("<Q", head)
            if header_len > min(MAX_HEADER_BYTES, size - 8):
                return f"{path.name} is truncated ({size} bytes, header claims {header_len})"
            header = json.loads(f.read(header_len))
    except (OSError, ValueError) as exc:
        return f"{path.name} has an unreadable header ({type(exc).__name__})"
    ends = [int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__"]
    expected = 8 + header_len + max(ends, default=0)
    if size < expected:
        return f"{path.name} is truncated ({size} of {expected} bytes)"
    return None


def torch_file_problem(path: Path) -> str | None:
    """None when a ``torch.save`` file (a zip archive) is whole: a cut-short one has lost its central directory."""
    size = path.stat().st_size
    try:
        with zipfile.ZipFile(path) as archive:
            extent = max((i.header_offset + i.compress_size for i in archive.infolist()), default=0)
    except (OSError, zipfile.BadZipFile, ValueError):
        return f"{path.name} is truncated or not a torch file ({size} bytes)"
    if extent > size:
        return f"{path.name} is truncated ({size} bytes, its entries reach {extent})"
    return None


def _file_problem(path: Path) -> str | None:
    if not path.is_file():
        return f"{path.name} missing"
    if path.stat().st_size == 0:
        return f"{path.name} is empty"
    if path.suffix == ".safetensors":
        return safetensors_problem(path)
    if path.suffix in (".pt", ".pth", ".bin"):
        return torch_file_problem(path)
    if path.suffix == ".json":
        return _json_problem(path)
    return None


def model_problems(folder: Path) -> list[str]:
    """What keeps ``from_pretrained(folder)`` from loading whole weights: config, weights (single or sharded)."""
    problems = [p for p in (_file_problem(folder / "config.json"),) if p]
    for index_name in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        index = folder / index_name
        if index.exists():
            if (bad := _json_problem(index)) is not None:
                return problems + [bad]
            shards = sorted(set(json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}).values()))
            problems += [p for p in (_file_problem(folder / s) for s in shards) if p]
            return problems
    for weights in ("model.safetensors", "pytorch_model.bin"):
        if (folder / weights).exists():
            return problems + [p for p in (_file_problem(folder / weights),) if p]
    return problems + ["model weights missing (no model.safetensors, pytorch_model.bin or shard index)"]


def _optimizer_problems(folder: Path) -> list[str]:
    deepspeed = sorted(p for p in folder.glob("global_step*") if p.is_dir())
    if deepspeed:  # ZeRO keeps optimizer (and often scheduler) state in its own folder
        files = [f for d in deepspeed for f in sorted(d.glob("*.pt"))]
        if not files:
            return [f"{deepspeed[-1].name}/ has no state files"]
        return [f"{f.parent.name}/{p}" for f in files if (p := _file_problem(f))]
    return [p for p in (_file_problem(folder / n) for n in ("optimizer.pt", "scheduler.pt")) if p]


def checkpoint_problems(folder: str | Path) -> list[str]:
    """Everything missing or cut short in a Trainer checkpoint folder (empty: complete, safe to resume)."""
    folder = Path(folder)
    if not folder.is_dir():
        return [f"{folder} is not a folder"]
    problems = model_problems(folder)
    problems += _optimizer_problems(folder)
    for extra in ("training_args.bin", "scaler.pt", "tokenizer.json", "tokenizer_config.json",
                  "generation_config.json"):
        if (folder / extra).exists() and (p := _file_problem(folder / extra)):
            problems.append(p)
    rng = sorted(folder.glob("rng_state*.pth"))
    problems += [p for f in rng if (p := _file_problem(f))] if rng else ["rng_state.pth missing"]
    state = folder / "trainer_state.json"
    if (bad := _file_problem(state)) is not None:
        problems.append(bad)
    else:
        match = CHECKPOINT_NAME.match(folder.name)
        step = json.loads(state.read_text(encoding="utf-8")).get("global_step")
        if match and step != int(match.group(1)):
            problems.append(f"trainer_state.json is for step {step}, not {match.group(1)}")
    return problems


def is_trainer_folder(folder: Path) -> bool:
    """A Trainer's checkpoint (by name or by the files only a Trainer writes), not a plain model folder."""
    return (bool(CHECKPOINT_NAME.match(folder.name)) or SET_ASIDE_MARK in folder.name
            or any((folder / n).exists() for n in TRAINER_FILES))


def evaluation_problems(folder: str | Path) -> list[str]:
    """Why a folder cannot be evaluated: a Trainer checkpoint must be complete; a plain model folder, loadable."""
    folder = Path(folder)
    if SET_ASIDE_MARK in folder.name:
        return [f"{folder.name} was set aside as an incomplete checkpoint"]
    return checkpoint_problems(folder) if is_trainer_folder(folder) else model_problems(folder)


def scan(output_dir: str | Path) -> list[CheckpointState]:
    """Every ``checkpoint-N`` folder directly under ``output_dir``, oldest step first, each with its problems."""
    root = Path(output_dir)
    found = [(int(m.group(1)), p) for p in root.glob("checkpoint-*")
             if p.is_dir() and (m := CHECKPOINT_NAME.match(p.name))]
    return [CheckpointState(p, step, checkpoint_problems(p)) for step, p in sorted(found)]


def complete_checkpoints(output_dir: str | Path) -> list[str]:
    """The complete ``checkpoint-N`` folders, oldest first; incomplete ones are left out (and left in place)."""
    return [str(s.path) for s in scan(output_dir) if s.complete]


def set_aside(state: CheckpointState, now: datetime | None = None) -> SetAside:
    """Rename an incomplete folder into ``<output_dir>/incomplete/`` with the time it was set aside; never delete."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    target_dir = state.path.parent / SET_ASIDE_DIR
    target_dir.mkdir(exist_ok=True)
    target = target_dir / f"{state.path.name}{SET_ASIDE_MARK}{stamp}"
    n = 1
    while target.exists():  # two set-asides of the same step in one second: keep both
        n += 1
        target = target_dir / f"{state.path.name}{SET_ASIDE_MARK}{stamp}-{n}"
    state.path.rename(target)
    return SetAside(state.path, target, state.problems)


def resume_point(output_dir: str | Path, progress: Callable[[str], None] | None = None,
                 move: bool = True) -> str | None:
    """The newest complete checkpoint to resume from, after setting aside every incomplete one (one line each).

    None (with a line saying so) when folders were set aside and no complete one is left: training starts afresh.
    ``move=False`` (the other processes of a multi-process run) only chooses; the main process does the renaming."""
    say = progress or _stderr
    states = scan(output_dir)
    for state in states:
        if not state.complete and move:
            moved = set_aside(state)
            say(f"checkpoint {state.path} is incomplete ({'; '.join(state.problems)}): "
                f"moved to {moved.moved_to}, not resumed from")
    complete = [s for s in states if s.complete]
    if complete:
        return str(complete[-1].path)
    if states and move:
        say(f"no complete checkpoint left in {output_dir}: training starts from step 0")
    return None
