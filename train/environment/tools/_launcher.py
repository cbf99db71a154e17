"""Runs as root inside the sandbox's fresh namespaces: hides the host's files, then runs the code unprivileged.

The host starts it as ``python -I -S -c <this source> <config json>`` in a new session, with the user code
on stdin and a status pipe on fd ``status_fd``. Only the standard library is used; nothing here is imported.
Steps: join the run's cgroup when the host made one; unshare mount, network, pid, IPC and UTS namespaces (SysV
IPC objects the code makes die with its IPC namespace; its hostname is its own); build a new root on a tmpfs
holding only read-only binds of the system folders and the interpreter, four /dev nodes and a size-limited
tmpfs working directory, then chroot into it (the process that runs the code is unprivileged, so it cannot
leave the chroot); fork pid 1 of the new pid namespace (its death kills every process the code started); fork
the code's process, which sets rlimits, drops to the run's own unprivileged uid, joins a fresh session keyring
(the caller's keys are out of reach), sets no_new_privs, installs a seccomp filter that refuses the key
syscalls (a key in a uid's user keyring would outlive the run on the host) and execs the interpreter.
"""

import ctypes
import json
import os
import resource
import sys

CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWPID, CLONE_NEWUSER = 0x00020000, 0x40000000, 0x20000000, 0x10000000
CLONE_NEWIPC, CLONE_NEWUTS = 0x08000000, 0x04000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 24, 22, 2
KEYCTL_JOIN_SESSION_KEYRING, EPERM = 1, 1
SETUP_FAILED = 125
CHILD_SETUP_PREFIX = "sandbox setup failed: "
HOSTNAME = b"sandbox"
# machine -> (seccomp audit arch, syscall numbers of add_key, request_key, keyctl)
KEY_SYSCALLS = {"x86_64": (0xC000003E, (248, 249, 250)), "aarch64": (0xC00000B7, (217, 218, 219))}
X32_SYSCALL_BIT = 0x40000000  # x86_64's x32 ABI: the same calls under other numbers, refused as a whole

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


def child_fail(what):
    """The code's process cannot report on the status pipe (closed): its stderr carries the reason."""
    os.write(2, ("%s%s: %s\n" % (CHILD_SETUP_PREFIX, what, os.strerror(ctypes.get_errno()))).encode())
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


class SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]


def key_filter(machine):
    """A seccomp program: add_key, request_key and keyctl fail with EPERM, a foreign arch is killed."""
    arch, numbers = KEY_SYSCALLS[machine]
    load, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    allow, refuse, kill = 0x7FFF0000, 0x00050000 | EPERM, 0x80000000
    checks = ([(jge, X32_SYSCALL_BIT)] if machine == "x86_64" else []) + [(jeq, n) for n in numbers]
    prog = [(load, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, kill), (load, 0, 0, 0)]
    for i, (op, k) in enumerate(checks):
        prog.append((op, len(checks) - i, 0, k))  # to the final "refuse"
    prog += [(ret, 0, 0, allow), (ret, 0, 0, refuse)]
    return (SockFilter * len(prog))(*[SockFilter(c, t, f, k) for c, t, f, k in prog])


def in_own_cgroup(folder):
    try:
        with open(folder + "/cgroup.procs", "w") as f:
            f.write(str(os.getpid()))
    except OSError as exc:
        fail("join cgroup %s: %s" % (folder, exc.strerror))


machine = os.uname().machine
if machine not in KEY_SYSCALLS:
    fail("no seccomp key filter for machine %s" % machine)
if cfg.get("cgroup"):  # before anything forks: every process of the run is then counted in it
    in_own_cgroup(cfg["cgroup"])
code = sys.stdin.buffer.read()
user_ns = cfg["mode"] == "userns"
flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | (CLONE_NEWUSER if user_ns else 0)
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
check(libc.sethostname(HOSTNAME, len(HOSTNAME)), "sethostname")  # its own UTS namespace: the host's name is unseen

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
program = key_filter(machine)  # built before the address-space limit applies to this process
fprog = SockFprog(len(program), program)
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
# a fresh anonymous session keyring, owned by the run's uid: the caller's session keys are no longer possessed
if libc.syscall(KEY_SYSCALLS[machine][1][2], KEYCTL_JOIN_SESSION_KEYRING, None) < 0:
    child_fail("join a fresh session keyring")
if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
    child_fail("set no_new_privs")
if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
    child_fail("install the seccomp filter")
os.chdir(workdir)
devnull = os.open("/dev/null", os.O_RDONLY)
os.dup2(devnull, 0)
os.execve(cfg["python"], [cfg["python"], "-I", "-B", "main.py"], cfg["env"])
