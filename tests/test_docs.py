"""Docs that run: every ```bash and ```python example in README.md and docs/*.md is extracted and executed in a
temporary folder, and must exit 0.

The folder holds links to the checkout's code (so ``scripts/``, ``domains/`` and ``python -m ...`` work as in a
clone) and a real ``warehouse/`` with a small published snapshot (weather and railway) at
``warehouse/toolscale.duckdb``, the README's default. The examples of one file run in order in one folder, as a
reader follows them; a python block runs after the file's earlier python blocks (one session). ``PATH`` starts
with ``.venv/bin`` (as after ``source .venv/bin/activate``), and a temporary ``PREFECT_HOME`` is used.

An example may carry markers, HTML comments on the lines right before its fence, which readers see in the source:

- ``<!-- docs-test: env NAME=VALUE ... -->``  run it with these environment variables (the example reads them,
  e.g. ``TOOLSCALE_SETUP_VERIFY_ONLY=1``: the setup scripts check the installed venv instead of installing);
- ``<!-- docs-test: replace "OLD" "NEW" -->``  run it with OLD replaced by NEW (a smaller size for a long run);
  repeatable, and OLD must occur;
- ``<!-- docs-test: interpreter .venv-tau2/bin/python -->``  run a python block with that interpreter;
- ``<!-- docs-test: synopsis -->``  a usage synopsis (``[--json]``, ``N``), not a command: every ``toolscale``
  command in it must exist and accept each ``--option`` written beside it, and every ``python -m MODULE`` must be
  a module of the checkout that reads each option written beside it, and every ``prefect deployment run
  'FLOW/NAME'`` a deployment of prefect.yaml.

An unmarked block of another language (yaml, sql, text) is not an example to run; a shell or python block with no
fence language fails the inventory test, so none is skipped by omission.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = ("bash", "python")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
MARKER = re.compile(r"<!--\s*docs-test:\s*(.*?)\s*-->\s*$")
SHELL_HINT = re.compile(r"^(\$ )?(toolscale|python|prefect|bash|\.venv|export|pip|PYTHONPATH=)\b", re.M)
KEEP_OUT = {"warehouse", "work", "out", ".git", "my_domains", ".pytest_cache"}  # written by examples: not linked
EXAMPLE_TIMEOUT_S = 600


@dataclass
class Example:
    doc: Path
    line: int
    language: str
    code: str
    env: dict[str, str] = field(default_factory=dict)
    replace: list[tuple[str, str]] = field(default_factory=list)
    synopsis: bool = False
    interpreter: str = ".venv/bin/python"  # a python block's interpreter, relative to the checkout

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"

    def runnable_code(self) -> str:
        code = self.code
        for old, new in self.replace:
            assert old in code, f"{self.id}: marker replaces {old!r}, which the example does not contain"
            code = code.replace(old, new)
        return code


def _markers(text: str, fence_start: int) -> list[str]:
    """The docs-test markers on the lines right above a fence (one per line)."""
    found = []
    for line in reversed(text[:fence_start].rstrip("\n").split("\n")):
        m = MARKER.search(line)
        if not m:
            break
        found.append(m.group(1))
    return found[::-1]


def examples(doc: Path) -> list[Example]:
    text = doc.read_text()
    found = []
    for m in FENCE.finditer(text):
        if m.group(1) not in RUNNABLE:
            continue
        ex = Example(doc, text[:m.start()].count("\n") + 1, m.group(1), m.group(2))
        for marker in _markers(text, m.start()):
            kind, _, rest = marker.partition(" ")
            if kind == "env":
                ex.env.update(item.split("=", 1) for item in shlex.split(rest))
            elif kind == "replace":
                words = shlex.split(rest)
                assert len(words) % 2 == 0, f"{doc}: replace needs pairs, got {rest!r}"
                ex.replace += list(zip(words[::2], words[1::2]))
            elif kind == "interpreter":
                ex.interpreter = rest.strip()
            elif kind == "synopsis":
                ex.synopsis = True
            else:
                raise AssertionError(f"{doc}:{ex.line}: unknown docs-test marker {marker!r}")
        found.append(ex)
    return found


ALL = [ex for doc in DOC_FILES for ex in examples(doc)]


def test_every_shell_or_python_block_is_tagged_so_that_it_runs() -> None:
    untagged = []
    for doc in DOC_FILES:
        text = doc.read_text()
        for m in FENCE.finditer(text):
            if m.group(1) == "" and SHELL_HINT.search(m.group(2)):
                untagged.append(f"{doc.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}")
    assert untagged == [], "shell examples without a fence language (tag them bash): " + ", ".join(untagged)
    assert len(ALL) >= 20, len(ALL)


@pytest.fixture(scope="module")
def doc_folders(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, Path]:
    """One folder per doc file: links to the checkout, a real warehouse/ with a published snapshot."""
    from tests.snapshots import published_warehouse

    snapshot = published_warehouse(tmp_path_factory.mktemp("docs-snapshot"), ["weather", "railway"])
    folders = {}
    for doc in DOC_FILES:
        folder = tmp_path_factory.mktemp(doc.stem)
        for entry in ROOT.iterdir():
            if entry.name not in KEEP_OUT:
                (folder / entry.name).symlink_to(entry)
        (folder / "warehouse").mkdir()
        shutil.copyfile(snapshot, folder / "warehouse" / "toolscale.duckdb")
        folders[doc] = folder
    return folders


def _env(folder: Path, extra: dict[str, str]) -> dict[str, str]:
    venv_bin = ROOT / ".venv" / "bin"
    (folder / "work" / "prefect-home").mkdir(parents=True, exist_ok=True)  # a bench run elsewhere cannot make it
    return {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONPATH": str(ROOT),
            "PREFECT_HOME": str(folder / "work" / "prefect-home"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "TOOLSCALE_DEBUG": "1", **extra}


def _parser() -> argparse.ArgumentParser:
    from toolscale.cli import build_parser

    return build_parser()


def _subcommand_options(parser: argparse.ArgumentParser, words: list[str]) -> tuple[str, set[str]]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    name = words[0]
    assert name in action.choices, f"no toolscale command {name!r}"
    sub = action.choices[name]
    options = {o for a in sub._actions for o in a.option_strings}
    nested = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
    if nested and len(words) > 1 and words[1] in nested[0].choices:  # e.g. `preferences show`, `pricing load`
        options |= {o for a in nested[0].choices[words[1]]._actions for o in a.option_strings}
    return name, options


def check_synopsis(ex: Example) -> None:
    parser = _parser()
    commands = 0
    for line in ex.code.splitlines():
        line = line.split("  #")[0].strip()
        words = re.findall(r"--[\w-]+", line)
        if line.startswith("toolscale "):
            name, options = _subcommand_options(parser, line.split()[1:])
            missing = [w for w in words if w not in options]
            assert not missing, f"{ex.id}: `toolscale {name}` has no option {', '.join(missing)}"
            commands += 1
        elif line.startswith("python -m "):
            module = line.split()[2]
            source = ROOT / Path(*module.split(".")).with_suffix(".py")
            assert source.is_file(), f"{ex.id}: no module {module} in the checkout"
            missing = [w for w in words if w not in source.read_text()]
            assert not missing, f"{ex.id}: {module} reads no option {', '.join(missing)}"
            commands += 1
        elif line.startswith("prefect deployment run "):
            flow, _, name = line.split()[3].strip("'\"").partition("/")
            deployments = _deployments()
            assert (flow, name) in deployments, f"{ex.id}: prefect.yaml has no deployment {flow}/{name}"
            commands += 1
    assert commands, f"{ex.id}: a synopsis without commands"


def _deployments() -> set[tuple[str, str]]:
    """(flow name, deployment name) of every deployment in prefect.yaml."""
    import yaml

    found = set()
    for d in yaml.safe_load((ROOT / "prefect.yaml").read_text())["deployments"]:
        module, _, function = d["entrypoint"].partition(":")
        source = (ROOT / module).read_text()
        flow = re.search(rf"@flow\(name=\"([\w-]+)\"[^)]*\)\s*\ndef {function}\b", source)
        found.add((flow.group(1) if flow else function, d["name"]))
    return found


@pytest.mark.parametrize("ex", ALL, ids=[ex.id for ex in ALL])
def test_example_runs(ex: Example, request: pytest.FixtureRequest) -> None:
    if ex.synopsis:
        check_synopsis(ex)
        return
    folder = request.getfixturevalue("doc_folders")[ex.doc]
    if ex.language == "python":
        earlier = [e.runnable_code() for e in ALL if e.doc == ex.doc and e.language == "python" and e.line < ex.line
                   and e.interpreter == ex.interpreter and not e.synopsis]
        argv = [str(ROOT / ex.interpreter), "-c", "\n".join([*earlier, ex.runnable_code()])]
    else:
        argv = ["bash", "-euo", "pipefail", "-c", ex.runnable_code()]
    start = time.monotonic()
    # its own process group: servers and workers an example starts in the background end with it
    proc = subprocess.Popen(argv, cwd=folder, env=_env(folder, ex.env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=EXAMPLE_TIMEOUT_S)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    took = time.monotonic() - start
    assert proc.returncode == 0, (f"{ex.id} exited {proc.returncode} after {took:.0f} s\n--- stdout\n"
                                  f"{stdout[-3000:]}\n--- stderr\n{stderr[-3000:]}")
    print(f"{ex.id}: {took:.1f} s", file=sys.stderr)
