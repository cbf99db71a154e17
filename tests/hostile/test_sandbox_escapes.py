"""Hostile code against the code interpreter's sandbox: each escape fails inside, the run says why in one line,
and the host is left as it was (no process, SysV IPC object, key, /dev/shm file or cgroup of the run survives).

Run as root (the project's machines); where the memory controller of a cgroup v2 is not delegated the tree-wide
memory limit is the rlimit split (``memory_plan``), and the cases assert what holds under either plan."""

from __future__ import annotations

import ctypes
import json
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from train.environment.tools import SandboxLimits, SandboxRun, run_python
from train.environment.tools.sandbox import CGROUP_PREFIX, PROJECT_ROOT, SANDBOX_UID_BASE, SANDBOX_UID_COUNT, memory_plan

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or os.uname().machine != "x86_64",
                                reason="the sandbox runs as root here; the syscall numbers below are x86_64's")

FAST = SandboxLimits(wall_s=8.0, cpu_s=3, memory_mb=256, processes=16, file_mb=4, disk_mb=8, output_bytes=32_768)
IPC_CREAT, IPC_RMID = 0o1000, 0
SYS_ADD_KEY, SYS_KEYCTL = 248, 250
KEYCTL_JOIN_SESSION_KEYRING, KEY_SPEC_SESSION_KEYRING = 1, -3
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p


def _in_sandbox_range(uid: int) -> bool:
    return SANDBOX_UID_BASE <= uid < SANDBOX_UID_BASE + SANDBOX_UID_COUNT


def sandbox_processes() -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                uid = entry.stat().st_uid
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if _in_sandbox_range(uid) or b"-B\0main.py" in cmdline:
                found.append(f"{entry.name} {cmdline[:80]!r}")
    return found


def sysv_objects() -> set[str]:
    """Host SysV IPC objects a sandbox uid owns (``kind key id``)."""
    out = set()
    for kind in ("shm", "msg", "sem"):
        lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        header = lines[0].split()
        for line in lines[1:]:
            row = dict(zip(header, line.split()))
            if _in_sandbox_range(int(row["uid"])) or _in_sandbox_range(int(row["cuid"])):
                out.add(f"{kind} {row['key']} {row.get('shmid') or row.get('msqid') or row.get('semid')}")
    return out


def key_users() -> set[str]:
    """Per-uid key counts of sandbox uids on the host (``/proc/key-users``)."""
    return {line.strip() for line in Path("/proc/key-users").read_text().splitlines()
            if _in_sandbox_range(int(line.split(":")[0]))}


def run_cgroups() -> list[str]:
    plan = memory_plan(FAST)
    if plan.cgroup_parent is None:
        return []
    return sorted(p.name for p in plan.cgroup_parent.iterdir() if p.name.startswith(CGROUP_PREFIX))


@pytest.fixture(autouse=True)
def host_unaffected() -> Iterator[None]:
    before = (sysv_objects(), key_users(), set(os.listdir("/dev/shm")), set(os.listdir("/tmp")), run_cgroups(),
              socket.gethostname())
    yield
    deadline = time.monotonic() + 5
    # the run's anonymous session keyring is freed by the kernel's key collector shortly after its last process
    while (sandbox_processes() or key_users() - before[1]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sandbox_processes() == []
    after = (sysv_objects(), key_users(), set(os.listdir("/dev/shm")), set(os.listdir("/tmp")), run_cgroups(),
             socket.gethostname())
    assert after[0] <= before[0], after[0] - before[0]  # no SysV object of a sandbox uid appeared
    assert after[1] <= before[1]  # no key of a sandbox uid
    assert not {n for n in after[2] - before[2] if "toolscale" in n or "escape" in n}
    assert not {n for n in after[3] - before[3] if "sandbox" in n or "escape" in n}
    assert after[4] == before[4]
    assert after[5] == before[5]


def one_line(run: SandboxRun) -> str:
    assert run.error is not None and "\n" not in run.error and "Traceback" not in run.error, run.error
    return run.error


def lines(run: SandboxRun) -> list[str]:
    assert run.error is None, (run.error, run.stderr[-500:])
    return run.stdout.splitlines()


PROBE = "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.shmat.restype = ctypes.c_void_p\n" \
        "def errno_of(rc):\n    return 'ok' if rc not in (-1, None) else os.strerror(ctypes.get_errno())\n"


class HostSegment:
    """A SysV shared-memory segment of the host holding a secret (removed at the end)."""

    def __init__(self, size: int = 4096):
        self.key = random.randrange(0x10000000, 0x7FFFFFFF)
        self.id = libc.shmget(self.key, size, IPC_CREAT | 0o666)
        assert self.id >= 0, os.strerror(ctypes.get_errno())
        self.addr = libc.shmat(self.id, None, 0)
        self.secret = secrets.token_hex(16).encode()
        ctypes.memmove(self.addr, self.secret, len(self.secret))

    def content(self) -> bytes:
        return ctypes.string_at(self.addr, len(self.secret))

    def remove(self) -> None:
        libc.shmdt(ctypes.c_void_p(self.addr))
        libc.shmctl(self.id, IPC_RMID, None)


@pytest.fixture
def host_segment() -> Iterator[HostSegment]:
    seg = HostSegment()
    yield seg
    seg.remove()


# ---- SysV IPC: its own namespace -------------------------------------------------------------------------

def test_host_shm_segment_cannot_be_found_by_key(host_segment: HostSegment):
    run = run_python(PROBE + f"print(errno_of(libc.shmget({host_segment.key}, 0, 0)))", FAST)
    assert lines(run) == ["No such file or directory"]


def test_host_shm_segment_cannot_be_attached_and_read_by_id(host_segment: HostSegment):
    run = run_python(PROBE + f"a = libc.shmat({host_segment.id}, None, 0)\n"
                             "print('ok' if a not in (None, 2**64 - 1) else os.strerror(ctypes.get_errno()))\n"
                             "if a not in (None, 2**64 - 1): print(ctypes.string_at(a, 32))", FAST)
    assert lines(run) == ["Invalid argument"]
    assert host_segment.secret.decode() not in run.stdout


def test_host_shm_segment_cannot_be_overwritten_or_removed(host_segment: HostSegment):
    run = run_python(PROBE + f"a = libc.shmat({host_segment.id}, None, 0)\n"
                             "if a not in (None, 2**64 - 1): ctypes.memmove(a, b'owned' * 6, 30)\n"
                             f"print(errno_of(libc.shmctl({host_segment.id}, 0, None)))", FAST)
    assert lines(run) == ["Invalid argument"]
    assert host_segment.content() == host_segment.secret


def test_host_message_queue_and_semaphores_are_out_of_reach():
    key = random.randrange(0x10000000, 0x7FFFFFFF)
    queue, sems = libc.msgget(key, IPC_CREAT | 0o666), libc.semget(key, 1, IPC_CREAT | 0o666)
    try:
        run = run_python(PROBE + f"print(errno_of(libc.msgget({key}, 0)), errno_of(libc.semget({key}, 0, 0)),"
                                 f" errno_of(libc.msgctl({queue}, 0, None)))", FAST)
        assert lines(run) == ["No such file or directory No such file or directory Invalid argument"]
    finally:
        libc.msgctl(queue, IPC_RMID, None)
        libc.semctl(sems, 0, IPC_RMID)


def test_three_128_mb_segments_and_a_queue_are_gone_with_the_run():
    code = PROBE + ("ids = [libc.shmget(0x5eed0000 + i, 128 << 20, 0o1000 | 0o600) for i in range(3)]\n"
                    "q = libc.msgget(0x5eed0100, 0o1000 | 0o600)\ns = libc.semget(0x5eed0200, 4, 0o1000 | 0o600)\n"
                    "print(all(i >= 0 for i in ids), q >= 0, s >= 0)\n")
    run = run_python(code, FAST)
    assert lines(run) == ["True True True"]  # made inside its own namespace ...
    host = Path("/proc/sysvipc/shm").read_text() + Path("/proc/sysvipc/msg").read_text()
    assert "5eed0000" not in host.replace(" ", "") and str(0x5eed0000) not in host  # ... and absent on the host


def test_segments_left_by_a_killed_run_are_gone_too():
    code = PROBE + "libc.shmget(0x5eed0300, 1 << 20, 0o1000 | 0o600)\nimport time\ntime.sleep(60)"
    run = run_python(code, SandboxLimits(wall_s=1.0))
    assert one_line(run) == "wall time limit of 1 s exceeded; the process was killed"
    assert str(0x5eed0300) not in Path("/proc/sysvipc/shm").read_text()


def test_posix_shared_memory_has_no_host_dev_shm():
    code = ("import os\ntry:\n    open('/dev/shm/toolscale-escape', 'w').write('x')\nexcept OSError as e:\n"
            "    print(type(e).__name__)\nfrom multiprocessing import shared_memory\n"
            "shared_memory.SharedMemory('toolscale-escape', create=True, size=4096)\n")
    run = run_python(code, FAST)
    assert run.stdout == "FileNotFoundError\n"
    assert one_line(run).startswith("exit status 1: FileNotFoundError")
    assert not Path("/dev/shm/toolscale-escape").exists()


# ---- keys: a fresh session keyring, no key syscalls ---------------------------------------------------------

KEY_CALLER = """import ctypes, json, sys
libc = ctypes.CDLL(None, use_errno=True)
assert libc.syscall(250, 1, None) > 0  # this caller's own fresh session keyring, freed when it exits
serial = libc.syscall(248, b"user", b"toolscale-test-secret", sys.argv[1].encode(), len(sys.argv[1]), -3)
assert serial > 0, ctypes.get_errno()
from train.environment.tools import SandboxLimits, run_python
code = sys.stdin.read().replace("SERIAL", str(serial))
run = run_python(code, SandboxLimits(wall_s=8.0))
print(json.dumps({"stdout": run.stdout, "error": run.error, "serial": serial}))
"""


def run_with_a_session_key(code: str) -> tuple[dict[str, object], str]:
    """Run ``code`` from a caller whose session keyring holds a secret user key (``SERIAL`` is its id)."""
    secret = secrets.token_hex(16)
    done = subprocess.run([sys.executable, "-c", KEY_CALLER, secret], input=code, capture_output=True, text=True,
                          cwd=PROJECT_ROOT, env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}, timeout=60)
    assert done.returncode == 0, done.stderr[-1000:]
    return json.loads(done.stdout.splitlines()[-1]), secret


def test_caller_session_key_cannot_be_read_by_its_id():
    code = PROBE + "buf = ctypes.create_string_buffer(256)\nn = libc.syscall(250, 11, SERIAL, buf, 256)\n" \
                   "print(errno_of(n), buf.value)"
    result, secret = run_with_a_session_key(code)
    assert result["error"] is None and result["stdout"] == "Operation not permitted b''\n"
    assert secret not in str(result)


def test_caller_session_keyring_cannot_be_searched_or_listed():
    code = PROBE + ("print(errno_of(libc.syscall(250, 10, -3, b'user', b'toolscale-test-secret', 0)))\n"
                    "buf = ctypes.create_string_buffer(4096)\nprint(errno_of(libc.syscall(250, 6, -3, buf, 4096)))\n"
                    "print('toolscale-test-secret' in open('/proc/keys').read())")
    result, secret = run_with_a_session_key(code)
    assert result["stdout"] == "Operation not permitted\nOperation not permitted\nFalse\n", result
    assert secret not in str(result)


def test_session_keyring_is_fresh_not_the_callers():
    code = "print(sorted(l.split()[-1] for l in open('/proc/self/status') if l.startswith('Uid')))\n" \
           "print([l for l in open('/proc/keys') if 'toolscale' in l])"
    result, secret = run_with_a_session_key(code)
    assert result["error"] is None and "toolscale-test-secret" not in str(result["stdout"])


def test_keys_cannot_be_added_to_outlive_the_run():
    # a key in the uid's user keyring would stay on the host after the run; the filter refuses the call
    code = PROBE + "\n".join(f"print(errno_of(libc.syscall(248, b'user', b'left-{n}', b'x', 1, {n})))"
                             for n in (-4, -5, -3)) + "\nprint(errno_of(libc.syscall(249, b'user', b'x', None, -4)))"
    assert lines(run_python(code, FAST)) == ["Operation not permitted"] * 4


def test_x32_syscalls_are_refused_as_a_whole():
    # x86_64's x32 ABI reaches the same calls under other numbers (bit 30 set): the filter refuses all of them
    run = run_python(PROBE + "print(errno_of(libc.syscall(0x40000000 | 250, 0, -3, 0)), os.getpid() > 0)", FAST)
    assert lines(run) == ["Operation not permitted True"]


# ---- memory and processes: limits for the whole tree --------------------------------------------------------

SIX_CHILDREN = """import os, time
held = 0
children = []
for _ in range(6):
    pid = os.fork()
    if pid == 0:
        try:
            block = bytearray(b'x') * (400 << 20)  # written, so it is really resident
            time.sleep(1.5)  # all six at once
            os._exit(0)
        except MemoryError:
            os._exit(3)
    children.append(pid)
for pid in children:
    held += os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
print(held)
"""


def test_six_children_of_400_mb_stay_within_the_runs_512_mb():
    limits = SandboxLimits(wall_s=20.0, cpu_s=10, memory_mb=512)
    run = run_python(SIX_CHILDREN, limits)
    if run.error is None:
        assert int(run.stdout) * 400 <= 512, run.stdout  # the run held 1.55 GB at once
    else:
        assert one_line(run).startswith("memory limit of 512 MB exceeded"), run.error


def test_one_process_gets_at_most_its_share():
    plan = memory_plan(FAST)
    code = f"block = bytearray(b'x') * ({plan.per_process_mb + 8} << 20)\nprint('held')"
    run = run_python(code, FAST)
    assert one_line(run).startswith("memory limit of 256 MB exceeded"), run.error
    assert "held" not in run.stdout


def test_threads_share_their_process_limit():
    code = ("import threading\nheld = []\ndef grab():\n    try:\n        held.append(bytearray(b'x') * (200 << 20))\n"
            "    except MemoryError:\n        pass\nts = [threading.Thread(target=grab) for _ in range(3)]\n"
            "[t.start() for t in ts]\n[t.join() for t in ts]\nprint(len(held))")
    run = run_python(code, FAST)
    if run.error is None:
        assert int(run.stdout) * 200 <= 256
    else:
        assert one_line(run).startswith(("memory limit", "process limit", "exit status 1: RuntimeError")), run.error


def test_fork_bomb_of_detached_sleepers_is_capped_and_leaves_nothing():
    code = ("import os, time\nn = 0\nwhile True:\n    try:\n        pid = os.fork()\n    except OSError:\n"
            "        break\n    if pid == 0:\n        os.setsid()\n        time.sleep(60)\n        os._exit(0)\n"
            "    n += 1\nprint(n)")
    run = run_python(code, FAST)
    assert run.error is None and 0 < int(run.stdout) < memory_plan(FAST).processes, (run.error, run.stdout)
    # the autouse fixture asserts that none of the detached sleepers survives the run


def test_shm_segments_do_not_add_memory_beyond_the_limit():
    code = PROBE + ("i = libc.shmget(0, 1 << 30, 0o1000 | 0o600)\na = libc.shmat(i, None, 0)\n"
                    "print(errno_of(i), 'attached' if a not in (None, 2**64 - 1) else os.strerror(ctypes.get_errno()))")
    run = run_python(code, FAST)
    assert lines(run) == ["ok Cannot allocate memory"]  # a 1 GB segment cannot be mapped within 256 MB


# ---- host processes, names, namespaces -----------------------------------------------------------------------

def test_host_processes_cannot_be_signalled():
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        code = (f"import os, signal\nfor pid in ({sleeper.pid}, {os.getpid()}, -1):\n    try:\n"
                "        os.kill(pid, signal.SIGKILL)\n        print('sent')\n    except OSError as e:\n"
                "        print(type(e).__name__)\n")
        run = run_python(code, FAST)
        assert sleeper.poll() is None  # the host's process is alive
        assert run.stdout.splitlines()[:2] == ["ProcessLookupError", "ProcessLookupError"], run.stdout
    finally:
        sleeper.kill()
        sleeper.wait()


def test_host_processes_are_invisible_in_proc():
    run = run_python(f"import os\nprint(os.path.exists('/proc/{os.getpid()}'), sorted(os.listdir('/proc'))[:0],"
                     " open('/proc/1/cmdline').read().startswith('/'), '-I\\0-S\\0-c' in open('/proc/1/cmdline').read())", FAST)
    assert lines(run) == ["False [] True True"]  # pid 1 is the sandbox's own reaper (the launcher)


def test_hostname_is_its_own_and_cannot_be_changed():
    code = "import socket, ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nprint(socket.gethostname())\n" \
           "print(libc.sethostname(b'owned', 5), os.strerror(ctypes.get_errno()))"
    run = run_python(code, FAST)
    assert lines(run) == ["sandbox", "-1 Operation not permitted"]
    assert socket.gethostname() != "owned"


def test_a_user_namespace_cannot_regain_privileges():
    code = PROBE + "print(errno_of(libc.unshare(0x10000000)), errno_of(libc.unshare(0x08000000 | 0x04000000)))"
    assert lines(run_python(code, FAST)) == ["Operation not permitted Operation not permitted"]


def test_host_abstract_unix_socket_is_unreachable():
    name = f"\0toolscale-test-{secrets.token_hex(4)}"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(name)
    server.listen(1)
    server.setblocking(False)
    try:
        code = f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({name!r})\nprint('connected')"
        run = run_python(code, FAST)
        assert one_line(run) == "exit status 1: ConnectionRefusedError: [Errno 111] Connection refused"
        with pytest.raises(BlockingIOError):
            server.accept()
    finally:
        server.close()


def test_host_listener_and_outside_are_unreachable():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    try:
        port = listener.getsockname()[1]
        code = (f"import socket\nfor target in [('127.0.0.1', {port}), ('10.0.0.1', 80), ('::1', {port})]:\n"
                "    try:\n        socket.create_connection(target, timeout=1)\n        print('connected')\n"
                "    except OSError as e:\n        print(e.errno)")
        run = run_python(code, FAST)
        assert "connected" not in run.stdout and len(lines(run)) == 3
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()


def test_environment_and_files_of_the_caller_are_absent():
    os.environ["TOOLSCALE_TEST_SECRET"] = "env-secret-value"
    try:
        code = "import os\nprint(sorted(os.environ))\nprint(os.path.exists('/etc/passwd'), os.path.exists('/work'))"
        run = run_python(code, FAST)
        assert "env-secret-value" not in run.stdout and "TOOLSCALE_TEST_SECRET" not in run.stdout
        assert lines(run)[1] == "False False"
    finally:
        del os.environ["TOOLSCALE_TEST_SECRET"]
