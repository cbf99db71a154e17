"""Runs as root inside the sandbox's fresh namespaces: hides the host's files, then runs the code unprivileged.

The host starts it as ``python -I -S -c <this source> <config json>`` in a new session, with the user code
on stdin and a status pipe on fd ``status_fd``. Only the standard library is used; nothing here is imported.
Steps: unshare mount+network+pid namespaces; build a new root on a tmpfs holding only read-only binds of
the system folders and the interpreter, four /dev nodes and a size-limited tmpfs working directory, then
chroot into it (the process that runs the code is unprivileged, so it cannot leave the chroot); fork pid 1 of
the new pid namespace (its death kills every process the code started); fork the code's process, which sets
rlimits, drops to the run's own unprivileged uid with no_new_privs and execs the interpreter on ``main.py``.
"""

import ctypes
import json
import os
import resource
import sys

CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWPID, CLONE_NEWUSER = 0x00020000, 0x40000000, 0x20000000, 0x10000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP = 38, 24
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
user_ns = cfg["mode"] == "userns"
flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | (CLONE_NEWUSER if user_ns else 0)
check(libc.unshare(flags), "unshare(%snamespaces)" % ("user, " if user_ns else ""))
if user_ns:  # become root of the new user namespace, mapped to the caller's own host ids
    for name, text in (("setgroups", "deny"), ("uid_map", "0 %d 1" % cfg["host_uid"]),
                       ("gid_map", "0 %d 1" % cfg["host_gid"])):
        try:
            with open("/proc/self/" + name, "w") as f:
                f.write(text)
        except OSError as exc:
            fail("write /proc/self/%s: %s" % (name, exc.strerror))
mount(None, "/", None, MS_REC | MS_PRIVATE)

# A new root that holds only what Python needs: an allow-list, so nothing else of the host is reachable.
root = "/tmp"  # a fresh tmpfs covers it; the host's /tmp is untouched and unseen
mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=256k")


def bind_read_only(source, target):
    mount(source, target, None, MS_BIND | MS_REC)
    mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


for name in cfg["system_dirs"]:
    source, target = "/" + name, root + "/" + name
    if os.path.islink(source):
        os.symlink(os.readlink(source), target)  # e.g. /lib -> usr/lib on merged-/usr systems
    elif os.path.isdir(source):
        os.mkdir(target, 0o755)
        bind_read_only(source, target)
prefix = cfg["interpreter_prefix"]
if not os.path.isdir(root + prefix + "/bin"):  # outside the system folders (e.g. a pyenv build)
    os.makedirs(root + prefix, 0o755)
    bind_read_only(prefix, root + prefix)
os.mkdir(root + "/dev", 0o755)
for node in ("null", "zero", "random", "urandom"):
    open(root + "/dev/" + node, "w").close()
    mount("/dev/" + node, root + "/dev/" + node, None, MS_BIND)
os.mkdir(root + "/proc", 0o555)
workdir = cfg["workdir"]
os.makedirs(root + workdir, 0o755)
mount("tmpfs", root + workdir, "tmpfs", MS_NOSUID | MS_NODEV,
      "mode=0700,size=%dk,uid=%d,gid=%d" % (cfg["disk_kb"], cfg["uid"], cfg["gid"]))
main_py = root + workdir + "/main.py"
with open(main_py, "wb") as f:
    f.write(code)
os.chown(main_py, cfg["uid"], cfg["gid"])
mount(None, root, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
os.chroot(root)
os.chdir("/")

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
if user_ns:
    # uid 0 of a user namespace regains every capability on exec unless the bounding set is empty.
    for cap in range(64):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the last capability is fine
else:
    os.setgroups([])
    os.setgid(cfg["gid"])
    os.setuid(cfg["uid"])
if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
    os._exit(SETUP_FAILED)
os.chdir(workdir)
devnull = os.open("/dev/null", os.O_RDONLY)
os.dup2(devnull, 0)
os.execve(cfg["python"], [cfg["python"], "-I", "-B", "main.py"], cfg["env"])
