"""The code interpreter's sandbox stops hostile code with a clear error and leaves the host as it was."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from train.environment.tools import CodeInterpreterTool, SandboxLimits, run_python
from train.environment.tools.sandbox import PROJECT_ROOT, SANDBOX_UID_BASE, SANDBOX_UID_COUNT, SYSTEM_DIRS, memory_plan

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs root to create namespaces")

FAST = SandboxLimits(wall_s=8.0, cpu_s=2, memory_mb=256, processes=16, file_mb=4, disk_mb=8, output_bytes=32_768)


def sandbox_processes() -> list[int]:
    """Host processes owned by a sandbox uid or running sandboxed code; none may outlive a run."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                uid = entry.stat().st_uid
                cmdline = (entry / "cmdline").read_bytes()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if SANDBOX_UID_BASE <= uid < SANDBOX_UID_BASE + SANDBOX_UID_COUNT or b"-B\0main.py" in cmdline:
                pids.append(int(entry.name))
    return pids


def project_state() -> tuple[str, str]:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=PROJECT_ROOT, capture_output=True, text=True).stdout
    return git("rev-parse", "HEAD"), git("status", "--porcelain")


@pytest.fixture(autouse=True)
def host_unaffected():
    """Every test: no sandbox process survives, the project tree is unchanged, no sandbox folder is left."""
    before = project_state()
    tmp_before = set(os.listdir("/tmp"))
    yield
    deadline = time.monotonic() + 2
    while sandbox_processes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sandbox_processes() == []
    assert project_state() == before
    assert not {n for n in set(os.listdir("/tmp")) - tmp_before if "sandbox" in n}


def test_normal_code_returns_stdout_and_runs_unprivileged_without_network():
    code = ("import os, json\n"
            "print(sum(range(10)))\n"
            "print(json.dumps({'uid': os.getuid(), 'cwd': os.getcwd(),"
            " 'pids': sorted(p for p in os.listdir('/proc') if p.isdigit()),"
            " 'ifaces': [l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]]}))\n"
            "open('scratch.txt', 'w').write('ok')\nprint(open('scratch.txt').read())\n")
    run = run_python(code, FAST)
    assert run.error is None, run.stderr
    first, facts, last = run.stdout.splitlines()
    info = json.loads(facts)
    assert first == "45" and last == "ok"
    assert SANDBOX_UID_BASE <= info["uid"] < SANDBOX_UID_BASE + SANDBOX_UID_COUNT
    assert info["ifaces"] == ["lo"]  # an empty network namespace
    assert info["pids"] == ["1", "2"]  # its own pid namespace: the reaper and the program


def test_failing_code_reports_its_exception():
    run = run_python("raise ValueError('bad input')", FAST)
    assert run.exit_code == 1
    assert run.error == "exit status 1: ValueError: bad input"


def test_socket_cannot_reach_the_host_or_the_outside():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        for target in (f"('127.0.0.1', {port})", "('1.1.1.1', 53)"):
            run = run_python(f"import socket\nsocket.create_connection({target}, timeout=2)\nprint('connected')", FAST)
            assert run.error is not None and "connected" not in run.stdout
            assert "Network is unreachable" in run.error or "Connection refused" in run.error, run.error
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing ever connected to the host
    finally:
        listener.close()


def test_writes_outside_its_directory_fail(tmp_path: Path):
    targets = [str(PROJECT_ROOT / "sandbox_escape.txt"), "/tmp/sandbox_escape.txt", "/var/tmp/sandbox_escape.txt",
               "../sandbox_escape.txt", "/etc/sandbox_escape.txt", str(tmp_path / "escape.txt")]
    for target in targets:
        run = run_python(f"open({target!r}, 'w').write('x')", FAST)
        assert run.error is not None and run.error.startswith("exit status 1: "), (target, run.error)
        assert "Error" in run.error
    assert not any(Path(t).exists() for t in targets if t.startswith("/"))
    assert not Path("/tmp/sandbox_escape.txt").exists()


def test_project_files_are_invisible():
    probe = ("import os, sys\nfound = []\n"
             f"for p in [{str(PROJECT_ROOT / 'README.md')!r}, {str(PROJECT_ROOT / 'pyproject.toml')!r}, "
             f"{sys_prefix_file()!r}, '/root/.bashrc']:\n"
             "    try:\n        open(p).read(1); found.append(p)\n    except OSError:\n        pass\n"
             f"print(found, os.path.exists({str(PROJECT_ROOT)!r}))\n")
    run = run_python(probe, FAST)
    assert run.error is None, run.stderr
    assert run.stdout.strip() == "[] False"
    run = run_python("import os\nprint(sorted(os.listdir('/')))", FAST)
    interpreter_top = Path(os.path.realpath(sys.base_prefix)).parts[1]
    assert set(eval(run.stdout)) <= {*SYSTEM_DIRS, "dev", "proc", "tmp", interpreter_top}  # an allow-list root
    run = run_python(f"print(open({str(PROJECT_ROOT / 'README.md')!r}).read())", FAST)
    assert run.error is not None and "No such file or directory" in run.error


def sys_prefix_file() -> str:
    return os.path.join(sys.prefix, "pyvenv.cfg")


def test_fork_bomb_is_stopped_and_leaves_no_process():
    run = run_python("import os\nwhile True:\n    os.fork()", FAST)
    assert run.error is not None
    processes = memory_plan(FAST).processes  # 16, or fewer where the memory is split between processes
    assert run.error.startswith((f"process limit of {processes} reached", "wall time limit", "output limit")), run.error


def test_a_fork_bomb_does_not_starve_a_concurrent_run():
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        bomb = pool.submit(run_python, "import os, time\nwhile True:\n    try:\n        os.fork()\n"
                                       "    except OSError:\n        time.sleep(0.01)", SandboxLimits(wall_s=4.0))
        time.sleep(1.0)
        neighbour = run_python("import subprocess, sys\nprint(subprocess.run([sys.executable, '-c', 'print(7)'],"
                               " capture_output=True, text=True).stdout.strip())", FAST)
        assert bomb.result().error == "wall time limit of 4 s exceeded; the process was killed"
    assert neighbour.error is None and neighbour.stdout == "7\n", neighbour


def test_detached_children_die_with_the_run():
    code = ("import os, time\n"
            "if os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\n"
            "print('parent done')\n")
    run = run_python(code, FAST)
    assert run.error is None and run.stdout == "parent done\n"
    # the autouse fixture asserts that the detached sleeper is gone


def test_ten_gigabytes_is_refused():
    run = run_python("data = bytearray(10 * 1024**3)\nprint(len(data))", FAST)
    assert run.error is not None and run.error.startswith("memory limit of 256 MB exceeded"), run.error


def test_busy_loop_hits_the_cpu_limit():
    run = run_python("while True:\n    pass", SandboxLimits(wall_s=30.0, cpu_s=1))
    assert run.error == "CPU time limit of 1 s exceeded; the process was killed"
    assert run.wall_s < 30


def test_sleeping_forever_hits_the_wall_limit():
    start = time.monotonic()
    run = run_python("import time\ntime.sleep(3600)", SandboxLimits(wall_s=1.5))
    assert run.error == "wall time limit of 1.5 s exceeded; the process was killed"
    assert time.monotonic() - start < 5


def test_printing_100_megabytes_is_cut_off():
    start = time.monotonic()
    run = run_python("import sys\nfor _ in range(100):\n    sys.stdout.write('x' * 1_000_000)", FAST)
    assert run.error == "output limit of 32768 bytes exceeded; the process was killed"
    assert len(run.stdout) <= 32_768
    assert time.monotonic() - start < 8


def test_big_files_and_full_disk_are_stopped():
    run = run_python("open('big', 'wb').write(b'0' * (5 << 20))", FAST)
    assert run.error is not None and run.error.startswith("file size limit of 4 MB exceeded"), run.error
    run = run_python("for i in range(5):\n    open(f'f{i}', 'wb').write(b'0' * (3 << 20))", FAST)
    assert run.error is not None and "No space left on device" in run.error, run.error


def test_code_interpreter_tool_wraps_the_sandbox():
    tool = CodeInterpreterTool(FAST)
    ok = tool.call({"code": "print(2 ** 10)"})
    assert ok.ok and ok.observation == "1024\n" and ok.cost_usd == 0.0 and ok.latency_s > 0
    bad = tool.call({"code": "import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=1)"})
    assert not bad.ok and json.loads(bad.observation)["error"] == bad.error
    missing = tool.call({"program": "print(1)"})
    assert not missing.ok and "code" in missing.error
    assert tool.schema()["parameters"]["required"] == ["code"]


USERNS_PROBE = """import ctypes, os, socket
status = open('/proc/self/status').read()
print(os.getuid(), status.split('CapEff:')[1].split()[0], status.split('CapBnd:')[1].split()[0])
print(ctypes.CDLL(None, use_errno=True).mount(b'tmpfs', b'/tmp', b'tmpfs', 0, None), ctypes.get_errno())
for attempt in (lambda: os.chroot('/tmp'), lambda: socket.create_connection(('1.1.1.1', 53), timeout=1),
                lambda: open('/usr/escape', 'w'), lambda: open(%r)):
    try:
        attempt()
        print('allowed')
    except OSError as exc:
        print(type(exc).__name__)
"""


def test_user_namespace_mode_has_no_capabilities_network_or_project():
    """The mode an unprivileged caller gets: root of its own user namespace, with every capability gone."""
    run = run_python(USERNS_PROBE % str(PROJECT_ROOT / "README.md"), FAST, isolation="userns")
    assert run.error is None, run.stderr
    ids, mount, *attempts = run.stdout.splitlines()
    assert ids == "0 0000000000000000 0000000000000000"
    assert mount == "-1 1"  # EPERM: cannot unmount or cover the sandbox's own mounts
    assert attempts == ["PermissionError", "OSError", "OSError", "FileNotFoundError"]


def test_user_namespace_mode_stops_hostile_code():
    assert run_python("data = bytearray(10 * 1024**3)", FAST, isolation="userns").error.startswith("memory limit")
    assert run_python("while True:\n    pass", SandboxLimits(wall_s=30.0, cpu_s=1),
                      isolation="userns").error.startswith("CPU time limit")
    # No fork bomb here: run by root, the namespace maps to the host's root user, whom RLIMIT_NPROC exempts.
