"""Runs as root inside the sandbox's fresh namespaces: hides the host's files, then runs the code unprivileged.

The host starts it as ``python -I -S -c <this source> <config json>`` in a new session, with the user code
on stdin and a status pipe on fd ``status_fd``. Only the standard library is used; nothing here is imported.
Steps: unshare mount+network+pid namespaces; cover writable and private directories with read-only tmpfs;
re-expose the interpreter read-only; mount a size-limited tmpfs as the working directory; fork pid 1 of
the new pid namespace (its death kills every process the code started); fork the code's process, which sets
rlimits, drops to the run's own unprivileged uid with no_new_privs and execs the interpreter on ``main.py``.
"""

import ctypes
import json
import os
import resource
import sys

CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWPID = 0x00020000, 0x40000000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_NO_NEW_PRIVS = 38
SETUP_FAILED = 125

cfg = json.loads(sys.argv[1])
status_fd = cfg["status_fd"]
libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def report(line):
    try:
        os.write(status_fd, (line + "\n").encode())
    except OSError:
        pass


def fail(what):
    report("setup " + what)
    os._exit(SETUP_FAILED)


def check(rc, what):
    if rc != 0:
        fail(what + ": " + os.strerror(ctypes.get_errno()))


def mount(source, target, fstype, flags, data=None):
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    check(libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), "mount " + target)


def status_of(wait_status):
    if os.WIFSIGNALED(wait_status):
        return "signal %d" % os.WTERMSIG(wait_status)
    return "exit %d" % os.WEXITSTATUS(wait_status)


def wait_for(pid):
    while True:
        try:
            return os.waitpid(pid, 0)[1]
        except InterruptedError:
            continue


code = sys.stdin.buffer.read()
check(libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID), "unshare(mount, network, pid namespaces)")
mount(None, "/", None, MS_REC | MS_PRIVATE)

# Open the interpreter's folder before it is covered, to bind it back from the open descriptor.
reveal_fd = os.open(cfg["interpreter_prefix"], os.O_PATH | os.O_DIRECTORY)
covered = []
for path in sorted(cfg["hide"], key=len):
    if os.path.isdir(path) and not os.path.islink(path):  # a parent already covered makes it vanish
        mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k")
        covered.append(path)
prefix = cfg["interpreter_prefix"]
if not os.path.isdir(os.path.join(prefix, "bin")):
    os.makedirs(prefix, 0o755, exist_ok=True)
    mount("/proc/self/fd/%d" % reveal_fd, prefix, None, MS_BIND | MS_REC)
    mount(None, prefix, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
os.close(reveal_fd)
workdir = cfg["workdir"]
os.makedirs(workdir, 0o755, exist_ok=True)
mount("tmpfs", workdir, "tmpfs", MS_NOSUID | MS_NODEV,
      "mode=0700,size=%dk,uid=%d,gid=%d" % (cfg["disk_kb"], cfg["uid"], cfg["gid"]))
main_py = os.path.join(workdir, "main.py")
with open(main_py, "wb") as f:
    f.write(code)
os.chown(main_py, cfg["uid"], cfg["gid"])
for path in covered:
    mount(None, path, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)

init = os.fork()
if init:
    ws = wait_for(init)
    os._exit(os.WEXITSTATUS(ws) if os.WIFEXITED(ws) else SETUP_FAILED)

# pid 1 of the new pid namespace: a fresh /proc shows only the sandbox's processes.
mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
child = os.fork()
if child:
    report("started")
    ws = wait_for(child)
    report(status_of(ws))
    os._exit(0)

os.close(status_fd)
limits = cfg["limits"]
for name, value in (("RLIMIT_CORE", (0, 0)), ("RLIMIT_AS", (limits["as"], limits["as"])),
                    ("RLIMIT_CPU", (limits["cpu"], limits["cpu"] + 1)),
                    ("RLIMIT_FSIZE", (limits["fsize"], limits["fsize"])),
                    ("RLIMIT_NPROC", (limits["nproc"], limits["nproc"])),
                    ("RLIMIT_NOFILE", (64, 64))):
    resource.setrlimit(getattr(resource, name), value)
os.setgroups([])
os.setgid(cfg["gid"])
os.setuid(cfg["uid"])
if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
    os._exit(SETUP_FAILED)
os.chdir(workdir)
devnull = os.open("/dev/null", os.O_RDONLY)
os.dup2(devnull, 0)
os.execve(cfg["python"], [cfg["python"], "-I", "-B", "main.py"], cfg["env"])
