"""Run untrusted Python in a throwaway sandbox and say, in one line, why it was stopped.

Isolation (see docs/tools.md): a separate process in new mount, network, pid, IPC and UTS namespaces (an empty
network namespace: only a down loopback; SysV IPC objects die with the run), with a fresh session keyring and a
seccomp filter refusing the key syscalls, chrooted into a new root that holds only read-only binds of the
system folders and the interpreter (an allow-list: the project, the virtual environment, home folders and
everything else of the host are absent), run under a fresh unprivileged uid with no_new_privs in a
size-limited tmpfs working directory that vanishes with the namespace, with rlimits on CPU time, address
space, file size and processes. Memory is limited for the whole process tree: by a cgroup v2 of its own
where one can be made (a writable cgroup with the memory controller delegated, found from
``$TOOLSCALE_SANDBOX_CGROUP`` or this process's own cgroup), else by splitting ``memory_mb`` between at most
``memory_mb // 64`` processes with an address-space limit each. The host enforces wall time (kills the process
group and with it pid 1 of the namespace, which takes every descendant along), removes the run's cgroup and
caps the output it reads. Needs root or unprivileged user namespaces (elsewhere every run is a "sandbox
unavailable" error, never an unsandboxed run).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import secrets
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[3]
_LAUNCHER = (Path(__file__).with_name("_launcher.py")).read_text()
SETUP_FAILED = 125
CHILD_SETUP_PREFIX = "sandbox setup failed: "  # the launcher's code process says why it could not start
WORKDIR = "/tmp/sandbox"
# Top-level host folders the sandbox's root binds read-only (symlinks such as /lib -> usr/lib are recreated).
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
# Each run gets its own uid (and gid) from a range no account uses, so RLIMIT_NPROC (counted per uid) is a
# per-run process limit: one run's fork bomb cannot starve a concurrent run, and leftovers are easy to find.
SANDBOX_UID_BASE = 1_900_000_000
SANDBOX_UID_COUNT = 1_000_000
_uids = itertools.count(random.randrange(SANDBOX_UID_COUNT))
CGROUP_ENV = "TOOLSCALE_SANDBOX_CGROUP"
CGROUP_PREFIX = "toolscale-sandbox-"
# Without a cgroup, each process gets memory_mb / processes of address space; below this share the interpreter
# itself does not start reliably (measured: python3.11 -I with a few stdlib imports needs about 24 MB).
MIN_PROCESS_MB = 64


@dataclass(frozen=True)
class SandboxLimits:
    """Per-run limits; the defaults suit an agent's short calculations."""

    wall_s: float = 10.0
    cpu_s: int = 5
    memory_mb: int = 512
    processes: int = 16
    file_mb: int = 16
    disk_mb: int = 32
    output_bytes: int = 65_536


@dataclass(frozen=True)
class MemoryPlan:
    """How a run's ``memory_mb`` holds for its whole process tree: ``cgroup`` (one memory.max over every
    process, each also limited to ``memory_mb`` of address space) or ``rlimit`` (at most ``processes``
    processes of ``per_process_mb`` address space each, so together never more than ``memory_mb``)."""

    mode: str
    per_process_mb: int
    processes: int
    cgroup_parent: Path | None = None


def memory_plan(limits: SandboxLimits) -> MemoryPlan:
    """The plan a run with ``limits`` gets on this machine."""
    parent = cgroup_parent()
    if parent is not None:
        return MemoryPlan("cgroup", limits.memory_mb, limits.processes, parent)
    return _rlimit_plan(limits)


def _rlimit_plan(limits: SandboxLimits) -> MemoryPlan:
    processes = max(1, min(limits.processes, limits.memory_mb // MIN_PROCESS_MB))
    return MemoryPlan("rlimit", limits.memory_mb // processes, processes)


def cgroup_parent() -> Path | None:
    """A cgroup v2 folder under which a run's own cgroup can be made (memory controller delegated to its
    children, writable), or None: ``$TOOLSCALE_SANDBOX_CGROUP`` when set, else this process's own cgroup."""
    named = os.environ.get(CGROUP_ENV, "").strip()
    folder = Path(named) if named else _own_cgroup_v2()
    if folder is None:
        return None
    try:
        delegated = (folder / "cgroup.subtree_control").read_text().split()
    except OSError:
        return None
    return folder if "memory" in delegated and os.access(folder, os.W_OK) else None


def _own_cgroup_v2() -> Path | None:
    try:
        own = next(line[3:] for line in Path("/proc/self/cgroup").read_text().splitlines() if line.startswith("0::"))
        mounts = [line.split(" - ")[0].split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
                  if " - " in line and line.split(" - ")[1].split()[:1] == ["cgroup2"]]
    except (OSError, StopIteration, IndexError):
        return None
    return Path(mounts[0]) / own.strip().lstrip("/") if mounts else None


def _make_cgroup(parent: Path, limits: SandboxLimits) -> Path | None:
    """The run's own cgroup under ``parent`` with its limits written, or None when it cannot be made."""
    folder = parent / f"{CGROUP_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
    try:
        folder.mkdir()
        (folder / "memory.max").write_text(str(limits.memory_mb << 20))
        # +2: the launcher and pid 1 of the namespace live in it too
        for name, value in (("memory.swap.max", "0"), ("pids.max", str(limits.processes + 2))):
            if (folder / name).exists():
                (folder / name).write_text(value)
    except OSError:
        _remove_cgroup(folder)
        return None
    return folder


def _remove_cgroup(folder: Path) -> bool:
    """Kill whatever is left in the run's cgroup and remove it; True when its memory limit killed a process."""
    if not folder.is_dir():
        return False
    oom = False
    try:
        events = dict(line.split() for line in (folder / "memory.events").read_text().splitlines())
        oom = int(events.get("oom_kill", 0)) > 0
    except (OSError, ValueError):
        pass
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            if (folder / "cgroup.kill").exists():
                (folder / "cgroup.kill").write_text("1")
            else:
                for pid in (folder / "cgroup.procs").read_text().split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            folder.rmdir()
            break
        except FileNotFoundError:
            break
        except OSError:
            time.sleep(0.02)  # busy until its last process is reaped
    return oom


@dataclass(frozen=True)
class SandboxRun:
    stdout: str
    stderr: str
    exit_code: int | None  # None when killed by a signal or never started
    signal: int | None
    error: str | None  # one line saying why the run failed or was stopped; None when it exited 0
    wall_s: float


def run_python(code: str, limits: SandboxLimits = SandboxLimits(), isolation: str = "auto") -> SandboxRun:
    """Run ``code`` as ``main.py`` in a fresh sandbox; never raises for anything the code does.

    ``isolation``: "root" (the code runs under a fresh host uid), "userns" (an unprivileged user
    namespace: the code is root of its own namespace with an empty capability set, mapped to the caller's
    uid) or "auto" (root when the caller is root, else userns). A root caller should not pick userns:
    its namespace maps to the host's root user, which RLIMIT_NPROC exempts (tests only)."""
    start = time.monotonic()
    if isolation == "auto":
        isolation = "root" if os.geteuid() == 0 else "userns"
    if isolation not in ("root", "userns"):
        raise ValueError(f"isolation must be auto, root or userns, not {isolation!r}")
    if isolation == "root" and os.geteuid() != 0:
        return SandboxRun("", "", None, None, "sandbox unavailable: isolation 'root' needs root", 0.0)
    uid = SANDBOX_UID_BASE + next(_uids) % SANDBOX_UID_COUNT if isolation == "root" else 0
    plan = memory_plan(limits)
    cgroup = _make_cgroup(plan.cgroup_parent, limits) if plan.cgroup_parent is not None else None
    if plan.mode == "cgroup" and cgroup is None:
        plan = _rlimit_plan(limits)
    try:
        return _run_in(code, limits, isolation, uid, plan, cgroup, start)
    finally:
        if cgroup is not None:
            _remove_cgroup(cgroup)


def _run_in(code: str, limits: SandboxLimits, isolation: str, uid: int, plan: MemoryPlan, cgroup: Path | None,
            start: float) -> SandboxRun:
    prefix = os.path.realpath(sys.base_prefix)
    python = os.path.join(prefix, "bin", f"python{sys.version_info.major}.{sys.version_info.minor}")
    status_r, status_w = os.pipe()
    config = {
        "status_fd": status_w, "interpreter_prefix": prefix, "python": python, "workdir": WORKDIR,
        "system_dirs": SYSTEM_DIRS, "uid": uid, "gid": uid, "mode": isolation,
        "cgroup": str(cgroup) if cgroup is not None else None,
        "host_uid": os.geteuid(), "host_gid": os.getegid(),
        "disk_kb": limits.disk_mb * 1024,
        "limits": {"as": plan.per_process_mb << 20, "cpu": limits.cpu_s, "fsize": limits.file_mb << 20,
                   "nproc": plan.processes},
        "env": {"PATH": "/usr/bin:/bin", "HOME": WORKDIR, "TMPDIR": WORKDIR, "LANG": "C.UTF-8",
                "PYTHONIOENCODING": "utf-8"},
    }
    try:
        proc = subprocess.Popen(
            [python, "-I", "-S", "-c", _LAUNCHER, json.dumps(config)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(status_w,), start_new_session=True,
            cwd="/", env={"PATH": "/usr/bin:/bin"})
    except OSError as exc:
        os.close(status_r)
        os.close(status_w)
        return SandboxRun("", "", None, None, f"sandbox unavailable: {exc}", time.monotonic() - start)
    os.close(status_w)
    try:
        stdout, stderr, status, stopped = _collect(proc, code.encode(errors="replace"), status_r, limits)
    finally:
        _kill_group(proc)
        os.close(status_r)
    oom_killed = _remove_cgroup(cgroup) if cgroup is not None else False
    wall = time.monotonic() - start
    out, err = stdout.decode(errors="replace"), stderr.decode(errors="replace")
    code_exit, sig = _parse_status(status)
    error = stopped or _explain(status, code_exit, sig, err, limits, plan, oom_killed, proc.returncode)
    return SandboxRun(out, err, code_exit, sig, error, wall)


def _collect(proc: subprocess.Popen[bytes], code: bytes, status_r: int,
             limits: SandboxLimits) -> tuple[bytes, bytes, list[str], str | None]:
    """Feed the code, read output and status lines until all close or a limit trips."""
    assert proc.stdin and proc.stdout and proc.stderr
    try:
        proc.stdin.write(code)
        proc.stdin.close()
    except BrokenPipeError:
        pass
    buffers: dict[int, bytearray] = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    status = bytearray()
    sel = selectors.DefaultSelector()
    for fd in (*buffers, status_r):
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    deadline = time.monotonic() + limits.wall_s
    stopped: str | None = None
    open_fds = len(buffers) + 1
    while open_fds and stopped is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            stopped = f"wall time limit of {limits.wall_s:g} s exceeded; the process was killed"
            break
        for key, _ in sel.select(timeout=remaining):
            chunk = os.read(key.fd, 65_536)
            if not chunk:
                sel.unregister(key.fd)
                open_fds -= 1
                continue
            (status if key.fd == status_r else buffers[key.fd]).extend(chunk)
            if sum(len(b) for b in buffers.values()) > limits.output_bytes:
                stopped = f"output limit of {limits.output_bytes} bytes exceeded; the process was killed"
    sel.close()
    out, err = (bytes(b[: limits.output_bytes]) for b in buffers.values())
    return out, err, status.decode(errors="replace").splitlines(), stopped


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the launcher's process group; pid 1 of the namespace is in it, and its death kills the rest."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def _parse_status(lines: list[str]) -> tuple[int | None, int | None]:
    for line in lines:
        kind, _, value = line.partition(" ")
        if kind == "exit":
            return int(value), None
        if kind == "signal":
            return None, int(value)
    return None, None


def _explain(status: list[str], exit_code: int | None, sig: int | None, stderr: str, limits: SandboxLimits,
             plan: MemoryPlan, oom_killed: bool, launcher_rc: int | None) -> str | None:
    setup = next((line[len("setup "):] for line in status if line.startswith("setup ")), None)
    if setup is not None or "started" not in status:
        return f"sandbox unavailable: {setup or f'launcher exited with {launcher_rc}: {_last_line(stderr)}'}"
    if exit_code == 0:
        return None
    if exit_code == SETUP_FAILED and stderr.startswith(CHILD_SETUP_PREFIX):
        return f"sandbox unavailable: {_last_line(stderr)[len(CHILD_SETUP_PREFIX):]}"
    share = f" ({plan.per_process_mb} MB per process)" if plan.mode == "rlimit" else ""
    if oom_killed:
        return f"memory limit of {limits.memory_mb} MB exceeded by the run's processes together; they were killed"
    if "BlockingIOError" in stderr and "Resource temporarily unavailable" in stderr:
        return f"process limit of {plan.processes} reached: {_last_line(stderr)}"
    if "MemoryError" in stderr or "Cannot allocate memory" in stderr:
        return f"memory limit of {limits.memory_mb} MB exceeded{share}: {_last_line(stderr)}"
    if sig == signal.SIGXCPU or sig == signal.SIGKILL:
        return f"CPU time limit of {limits.cpu_s} s exceeded; the process was killed"
    if sig == signal.SIGXFSZ or "File too large" in stderr:
        return f"file size limit of {limits.file_mb} MB exceeded"
    if sig is not None:
        return f"killed by signal {signal.Signals(sig).name}"
    return f"exit status {exit_code}: {_last_line(stderr)}"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no error output)"
