"""Sandbox init: runs as ``python -I -S _init.py FD`` and becomes pid 1 of a fresh sandbox.

Standard library only, and every module is imported before ``pivot_root``: after the switch the
host's Python files are no longer visible, but the already-loaded interpreter keeps running.

Protocol on the inherited SOCK_SEQPACKET socket FD (one ``marshal``-encoded dict per packet: the
stdlib's own format needs no import, where json would pull in ``re`` and cost every start ~4 ms):
  host -> init   config                      init -> host  {"stage": "unshared"}
  host -> init   {"op": "fds"} + fds         (idmapped layers and scratch when root-run; repeated)
  host -> init   {"op": "mapped", ...}       (host has written uid/gid maps)
  host -> init   {"op": "limited"}           (host has put the init in the sandbox's cgroups)
                                             init -> host  {"stage": "forked", "pid": <host pid of pid 1>}
                                             init -> host  {"stage": "ready", "shell": ...}
  host -> init   {"op": "exec", ...} + fds [reply socket, stdin memfd?]
A forked "shepherd" runs each command and answers on its own reply socket: a 4-byte length, a header
dict, then stdout and stderr bytes. Closing the control socket ends the sandbox. ``Wire`` frames all
of it (``channel.py`` is the host's end; a test checks that both name the same keys).

The host puts the init in the sandbox's cgroups before pid 1 exists (so every process is limited),
with oom_score_adj -1000 inherited by pid 1 and the shepherds; commands get 500. Pid 1 keeps signals
at their default action, which the kernel does not deliver to a pid namespace's init from inside it;
a shepherd the agent kills only loses its own command's result.
"""

import contextlib
import ctypes
import errno
import fcntl
import marshal
import os
import resource
import select
import signal
import socket
import stat
import struct
import sys
import time

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x20000, 0x2000000, 0x4000000, 0x8000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_DUMPABLE, PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 4, 1, 24, 38
PR_SET_CHILD_SUBREAPER, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 36, 22, 2
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}
SYS_MOVE_MOUNT, MOVE_MOUNT_F_EMPTY_PATH, AT_FDCWD = 429, 4, -100
# Capabilities a sandboxed root keeps (the usual container default); all others leave the bounding set.
KEEP_CAPS = {0, 1, 3, 4, 5, 6, 7, 8, 10, 13, 18, 27, 29, 31}
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
# /proc as runc leaves it: kernel knobs read-only, files that leak host state masked.
PROC_READONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs")
PROC_MASKED = ("kcore", "keys", "timer_list", "kmsg", "latency_stats", "sched_debug", "acpi", "scsi")
CHUNK = 1 << 16
# After a command exits, output still arriving from its background processes is read for this long.
DRAIN_S = 0.05
# Signals Python or init ignore that a command must see with their default action.
RESET_SIGNALS = (
    signal.SIGPIPE,
    signal.SIGXFSZ,
    signal.SIGCHLD,
    signal.SIGINT,
    signal.SIGQUIT,
    signal.SIGTERM,
    signal.SIGHUP,
)

# Commands made only of plain words are spawned directly, as `bash -c` itself would exec them,
# which saves a shell start-up per command. Anything with shell syntax or a builtin goes to bash.
PLAIN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:,+@%=-")
_SHELL_WORD_TEXT = (
    "! . : [ [[ ]] { } alias bg bind break builtin caller case cd command compgen complete compopt "
    "continue coproc declare dirs disown do done echo elif else enable esac eval exec exit export false "
    "fc fg fi for function getopts hash help history if in jobs kill let local logout mapfile popd "
    "printf pushd pwd read readarray readonly return select set shift shopt source suspend test then "
    "time times trap true type typeset ulimit umask unalias unset until wait while"
)
#: The first bytes of what the kernel execs itself; anything else bash would run as a script.
EXEC_MAGIC = (b"#!", b"\x7fELF")
SHELL_WORDS = frozenset(_SHELL_WORD_TEXT.split())

libc = ctypes.CDLL(None, use_errno=True)


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def check(ret: int, what: str) -> int:
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


def mount(src: str | None, target: str, fstype: str | None, flags: int = 0, data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    check(libc.mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


class Wire:
    """This end of the host's wire protocol (``channel.py`` is the host's): marshal dicts on the
    control socket, and a command's reply frame (a 4-byte length, a header, stdout, stderr)."""

    OP, STAGE, ERROR = "op", "stage", "error"
    OP_FDS, OP_MAPPED, OP_LIMITED = "fds", "mapped", "limited"
    STAGE_UNSHARED, STAGE_FORKED, STAGE_READY, STAGE_ERROR = "unshared", "forked", "ready", "error"
    EXIT_CODE, TIMED_OUT, DURATION_S = "exit_code", "timed_out", "duration_s"
    STDOUT_LEN, STDERR_LEN, OUTPUT_DROPPED = "stdout_len", "stderr_len", "output_dropped"
    LENGTH = struct.Struct("!I")

    encode = staticmethod(marshal.dumps)
    decode = staticmethod(marshal.loads)

    @classmethod
    def send(cls, sock: socket.socket, msg: dict) -> None:
        sock.send(cls.encode(msg))

    @classmethod
    def stage(cls, sock: socket.socket, stage: str, **fields: object) -> None:
        """Tell the host how far start-up got."""
        cls.send(sock, {cls.STAGE: stage, **fields})

    @classmethod
    def recv(cls, sock: socket.socket, fds: list[int]) -> dict:
        """The next message that is not an fd batch; fd batches are appended to ``fds``."""
        while True:
            data, got, _, _ = socket.recv_fds(sock, 1 << 20, 250)
            if not data:
                raise EOFError("host closed the control socket")
            msg = cls.decode(data)
            if msg.get(cls.OP) != cls.OP_FDS:
                return msg
            fds.extend(got)

    @classmethod
    def frame(cls, header: dict, stdout: bytes = b"", stderr: bytes = b"") -> bytes:
        data = cls.encode(header)
        return cls.LENGTH.pack(len(data)) + data + stdout + stderr

    @classmethod
    def result(
        cls, exit_code: int, timed_out: bool, duration_s: float, out: bytes, err: bytes, dropped: int = 0
    ) -> bytes:
        """The reply frame of a command that ran (or failed to start, exit code 126)."""
        header = {
            cls.EXIT_CODE: exit_code,
            cls.TIMED_OUT: timed_out,
            cls.DURATION_S: duration_s,
            cls.STDOUT_LEN: len(out),
            cls.STDERR_LEN: len(err),
            cls.OUTPUT_DROPPED: dropped,
        }
        return cls.frame(header, out, err)

    @classmethod
    def error(cls, message: str) -> bytes:
        """The reply frame of a shepherd that could not run its command at all."""
        return cls.frame({cls.ERROR: message})


# ---------------------------------------------------------------------- filesystem (outer init)
def setup_filesystem(cfg: dict, fds: list[int], resolv: str | None) -> None:
    """Mount every overlay of the plan on ``root/`` of the sandbox dir, plus a minimal /dev.

    Layers and the scratch dir are first attached under a private staging tmpfs (idmapped clones
    from the host, or bind mounts when unprivileged) and named relative to it, so the overlays'
    mount options show no host path; the staging mounts are detached once the overlays hold them.
    Paths are relative to the sandbox dir: once this process is the namespace's root (a host id that
    may not search the host's state dir), only the sandbox dir and below are reachable.
    """
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    os.chdir(cfg["scratch"])
    become_namespace_root(cfg)
    mount("tmpfs", "stage", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=755,size=64k")
    os.chdir("stage")
    sources = [*cfg["layers"], cfg["scratch"]]
    for index, source in enumerate(sources):
        name = f"l{index}" if index < len(cfg["layers"]) else "s"
        os.mkdir(name)
        if cfg["idmapped"]:
            check(libc.syscall(SYS_MOVE_MOUNT, fds[index], b"", AT_FDCWD, name.encode(),
                               MOVE_MOUNT_F_EMPTY_PATH), f"attach layer {index}")  # fmt: skip
        else:
            mount(source, name, None, MS_BIND)
    if resolv is not None:
        with open("resolv.conf", "w") as f:
            f.write(resolv)
    for m in cfg["mounts"]:
        lower = ":".join(f"l{i}" for i in m["layers"])
        opts = f"lowerdir={lower},upperdir=s/upper/{m['key']},workdir=s/work/{m['key']},userxattr"
        mount("overlay", "../root" + m["target"].rstrip("/"), "overlay", 0, opts)
    attach_binds(cfg, fds[len(sources) :])
    setup_dev("../root")
    if resolv is not None:
        bind_resolv_conf("../root", "resolv.conf")
    os.chdir("..")
    check(libc.umount2(b"stage", MNT_DETACH), "detach the staging mounts")


def attach_binds(cfg: dict, fds: list[int]) -> None:
    """Show host dirs inside (the verifier's tests read-only, its reward dir writable): idmapped
    clones made by the host, or plain binds when unprivileged. The host created each target as a
    real directory in the upper dir, so no component of its path is a symlink."""
    for index, bind in enumerate(cfg["binds"]):
        target = "../root" + bind["target"]
        locked = MS_NOSUID | MS_NODEV | (MS_RDONLY if bind["readonly"] else MS_NOEXEC)
        if cfg["idmapped"]:
            check(libc.syscall(SYS_MOVE_MOUNT, fds[index], b"", AT_FDCWD, target.encode(),
                               MOVE_MOUNT_F_EMPTY_PATH), f"attach {bind['target']}")  # fmt: skip
        else:
            mount(bind["source"], target, None, MS_BIND)
            mount(None, target, None, MS_BIND | MS_REMOUNT | locked)


def setup_dev(root: str) -> None:
    dev = root + "/dev"
    mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=65536k")
    for node in DEV_NODES:
        path = f"{dev}/{node}"
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o666))
        mount(f"/dev/{node}", path, None, MS_BIND)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("ptmx", "pts/ptmx"),
    ):
        os.symlink(target, f"{dev}/{name}")
    os.mkdir(f"{dev}/shm")
    mount("tmpfs", f"{dev}/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=262144k")
    os.mkdir(f"{dev}/pts")
    with contextlib.suppress(OSError):  # pseudo-terminals are a nicety; commands run without a tty
        mount("devpts", f"{dev}/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620")


def bind_resolv_conf(root: str, source: str) -> None:
    """The user-mode network's resolver, read-only over /etc/resolv.conf (created if the image has none)."""
    target = root + "/etc/resolv.conf"
    if os.path.islink(target) or not os.path.isfile(target):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(target)
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
    mount(source, target, None, MS_BIND)
    mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


# ---------------------------------------------------------------------- pid 1
def enter_root(cfg: dict) -> None:
    """As pid 1 (in the sandbox dir): mount and mask /proc, pivot into root/ and detach the host's root."""
    root = "root"
    proc = root + "/proc"
    mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    mask_proc(proc, root + "/dev/null")
    os.chdir(root)
    nr = SYS_PIVOT_ROOT.get(os.uname().machine)
    if nr is None:
        raise OSError(errno.ENOSYS, f"pivot_root syscall number unknown for {os.uname().machine}")
    check(libc.syscall(nr, b".", b"."), "pivot_root")
    check(libc.umount2(b".", MNT_DETACH), "umount old root")
    os.chdir("/")


def remove_files(paths: list) -> None:
    """Delete start-up hooks the verifier's sandbox must not honour (``/etc/ld.so.preload``), from
    its own upper dir: resolved inside the sandbox's root, so a symlink cannot point outside."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            if stat.S_ISDIR(os.lstat(path).st_mode):
                os.rename(path, f"{path}.ares-ignored")
            else:
                os.unlink(path)


def mask_proc(proc: str, null: str) -> None:
    locked = MS_NOSUID | MS_NODEV | MS_NOEXEC
    for name in PROC_READONLY:
        path = f"{proc}/{name}"
        if os.path.exists(path):
            mount(path, path, None, MS_BIND | MS_REC)
            mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | locked)
    for name in PROC_MASKED:
        path = f"{proc}/{name}"
        if os.path.isdir(path):
            mount("tmpfs", path, "tmpfs", MS_RDONLY | locked, "size=4k,mode=555")
        elif os.path.exists(path):
            mount(null, path, None, MS_BIND)


def harden(cfg: dict) -> None:
    name = cfg["hostname"].encode()
    check(libc.sethostname(name, len(name)), "sethostname")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:  # bring loopback up
        ifreq = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, 0x8913, ifreq))[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"lo", flags | 1))
    for cap in range(cfg["cap_last"] + 1):
        if cap not in KEEP_CAPS:
            check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap}")
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    check(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "not dumpable")  # no ptrace of init from inside
    if cfg.get("seccomp"):
        program = cfg["seccomp"]
        buf = ctypes.create_string_buffer(program, len(program))
        fprog = SockFprog(len(program) // 8, ctypes.addressof(buf))
        check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp filter")


# ---------------------------------------------------------------------- shepherds
def descendants(ancestor: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2 :].split()
            if fields[0] != b"Z":
                parents[int(entry)] = int(fields[1])
    found, frontier = [], {ancestor}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier}
        found.extend(frontier)
    return found


def kill_tree(reaped: dict[int, int]) -> None:
    """SIGKILL every descendant of this (subreaper) process until none is left."""
    for _ in range(1000):
        victims = descendants(os.getpid())
        if not victims:
            reap(reaped)  # zombies hold their pids (against a pids limit) until reaped
            return
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        reap(reaped)
        time.sleep(0.001)


def reap(reaped: dict[int, int]) -> None:
    """Collect exited children without blocking, remembering their statuses."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        reaped[pid] = status


class Capture:
    """A stream's output kept as a bounded head and tail; what falls in between is only counted."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        if self.limit is None:
            self.head += data
            return
        half = self.limit // 2
        room = half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            keep = self.limit - half
            if len(self.tail) > 2 * keep:
                self.dropped += len(self.tail) - keep
                del self.tail[: len(self.tail) - keep]

    def value(self) -> tuple[bytes, int]:
        keep = 0 if self.limit is None else self.limit - self.limit // 2
        if len(self.tail) > keep:
            self.dropped += len(self.tail) - keep
            del self.tail[: len(self.tail) - keep]
        if not self.dropped:
            return bytes(self.head + self.tail), 0
        marker = f"\n[ares: {self.dropped} bytes of output omitted]\n".encode()
        return bytes(self.head + marker + self.tail), self.dropped


def collect(child: int, pipes: list[int], timeout: float | None, limit: int | None) -> tuple:
    """Read the command's output until it exits (or times out), then what is left of it, briefly."""
    captures = {fd: Capture(limit) for fd in pipes}
    poller = select.poll()
    for fd in pipes:
        poller.register(fd, select.POLLIN)
    pidfd = os.pidfd_open(child)
    poller.register(pidfd, select.POLLIN)
    open_pipes = set(pipes)
    deadline = None if timeout is None else time.monotonic() + timeout
    timed_out, exited = False, False
    reaped: dict[int, int] = {}
    while not exited:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic()) * 1000
        events = poller.poll(wait)
        if not events and deadline is not None and time.monotonic() >= deadline:
            timed_out = True
            kill_tree(reaped)
            break
        for fd, _ in events:
            if fd == pidfd:
                exited = True
            elif not read_into(fd, captures[fd]):
                poller.unregister(fd)
                open_pipes.discard(fd)
    os.close(pidfd)
    drain_available(open_pipes, captures)
    status = reaped[child] if child in reaped else os.waitpid(child, 0)[1]
    return status, timed_out, captures, open_pipes


def read_into(fd: int, capture: Capture) -> bool:
    """Read one chunk; False at end of stream."""
    try:
        data = os.read(fd, CHUNK)
    except BlockingIOError:
        return True
    if not data:
        return False
    capture.add(data)
    return True


def drain_available(open_pipes: set[int], captures: dict[int, Capture]) -> None:
    """Output the command wrote before exiting is still in the pipes: read it without waiting for
    background processes that hold them open (for at most DRAIN_S)."""
    deadline = time.monotonic() + DRAIN_S
    for fd in list(open_pipes):
        os.set_blocking(fd, False)
        while time.monotonic() < deadline:
            try:
                data = os.read(fd, CHUNK)
            except BlockingIOError:
                break
            if not data:
                open_pipes.discard(fd)
                break
            captures[fd].add(data)


def discard_until_closed(open_pipes: set[int]) -> None:
    """Background processes still hold the command's output pipes: keep reading them (and reaping
    what this subreaper inherits) so they never block on a full pipe, until they close."""
    if not open_pipes:
        return
    # The command's status is collected: from now on the kernel reaps this subreaper's children at
    # once, so exited background processes do not hold pids (against the pids limit) as zombies.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    reap({})
    for fd in open_pipes:
        os.set_blocking(fd, True)
    while open_pipes:
        ready, _, _ = select.select(list(open_pipes), [], [])
        for fd in ready:
            if not os.read(fd, CHUNK):
                open_pipes.discard(fd)


def shepherd(req: dict, reply: socket.socket, stdin_fd: int | None, shell: str) -> None:
    """Run one command as a subreaper so that a timeout can kill everything it started."""
    apply_rlimits(req)
    start = time.monotonic()
    child, problem = None, enter_context(req)
    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    if problem is None:
        child, problem = spawn(req, stdin_fd, shell, out_w, err_w)
    os.close(out_w)
    os.close(err_w)
    status, timed_out, open_pipes = 126 << 8, False, set()
    captures = {out_r: Capture(None), err_r: Capture(None)}
    if child is not None:
        status, timed_out, captures, open_pipes = collect(
            child, [out_r, err_r], req.get("timeout"), req.get("output_limit")
        )
    code = os.waitstatus_to_exitcode(status)
    stdout, out_dropped = captures[out_r].value()
    stderr, err_dropped = captures[err_r].value()
    if problem is not None:
        stderr += problem.encode()
    exit_code = code if code >= 0 else 128 - code
    duration = time.monotonic() - start
    reply.sendall(Wire.result(exit_code, timed_out, duration, stdout, stderr, out_dropped + err_dropped))
    reply.close()
    discard_until_closed(open_pipes)


def enter_context(req: dict) -> str | None:
    """Become the command's user and enter its working directory; a message if that fails."""
    try:
        if req.get("user"):
            switch_user(req["user"], req["env"])
        os.chdir(req["cwd"])
    except LookupError as exc:
        return f"ares sandbox: {exc.args[0]}\n"
    except OSError as exc:
        return f"ares sandbox: cannot use working directory {req['cwd']!r}: {exc.strerror}\n"
    return None


def spawn(
    req: dict, stdin_fd: int | None, shell: str, out_w: int, err_w: int
) -> tuple[int | None, str | None]:
    """Start the command on the given stdin and output pipes: (its pid, None), or (None, why not)."""
    oom = None
    if "oom_score_adj" in req and OOM_FD is not None:
        # The command inherits the score at spawn: it, not its shepherd, is the OOM killer's choice.
        oom = os.pread(OOM_FD, 16, 0).strip()
        os.write(OOM_FD, b"%d" % req["oom_score_adj"])
    try:
        stdin = stdin_fd if stdin_fd is not None else os.open("/dev/null", os.O_RDONLY)
        actions = [
            (os.POSIX_SPAWN_DUP2, stdin, 0),
            (os.POSIX_SPAWN_DUP2, out_w, 1),
            (os.POSIX_SPAWN_DUP2, err_w, 2),
        ]
        if req.get("argv"):  # an exact command line, no shell and no PATH lookup
            path, argv, env = req["argv"][0], list(req["argv"]), req["env"]
        else:
            path, argv, env = direct_argv(req) or (shell, [shell, "-c", req["cmd"]], req["env"])
        try:
            child = os.posix_spawn(
                path, argv, env, file_actions=actions, setsid=True, setsigdef=RESET_SIGNALS, setsigmask=(),
            )  # fmt: skip
        except OSError as exc:  # e.g. the pids limit leaves no process to spawn
            return None, f"ares sandbox: cannot start the command: {exc.strerror}\n"
        return child, None
    finally:
        if oom is not None:
            os.write(OOM_FD, oom)  # back to the shepherd's own score (never below its floor)


def apply_rlimits(req: dict) -> None:
    """The command's rlimits, inherited by all it starts."""
    for res, value in req.get("rlimits", ()):
        hard = resource.getrlimit(res)[1]
        cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(res, (cap, cap))


def refuse(reply_fd: int, message: str) -> None:
    """Answer a command that cannot start as a failed run (exit code 126) with ``message`` on stderr."""
    with contextlib.suppress(OSError), socket.socket(fileno=os.dup(reply_fd)) as reply:
        reply.sendall(Wire.result(126, False, 0.0, b"", message.encode()))


def switch_user(spec: str, env: dict) -> None:
    """Become ``user[:group]`` (names or ids, looked up in the sandbox's own /etc files), like USER."""
    user, _, group = spec.partition(":")
    passwd = _table("/etc/passwd")
    groups = _table("/etc/group")
    entry = next((e for e in passwd if user in (e[0], e[2])), None)
    if entry is None and not user.isdigit():
        raise LookupError(f"unable to find user {user}: no matching entries in passwd file")
    try:
        uid = int(entry[2]) if entry else int(user)
        gid = int(entry[3]) if entry else uid
    except ValueError as exc:
        raise LookupError(f"unable to find user {user}: malformed passwd entry") from exc
    if group:
        match = next((g for g in groups if group in (g[0], g[2])), None)
        if match is None and not group.isdigit():
            raise LookupError(f"unable to find group {group}: no matching entries in group file")
        gid = int(match[2]) if match and match[2].isdigit() else int(group) if group.isdigit() else gid
    name = entry[0] if entry else None
    extra = [int(g[2]) for g in groups if name and len(g) > 3 and g[2].isdigit() and name in g[3].split(",")]
    if (uid, gid) == (os.getuid(), os.getgid()) and not extra:
        return  # already that user (e.g. USER root; unprivileged sandboxes may not call setgroups)
    try:
        os.setgroups(sorted({gid, *extra}))
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    except OSError as exc:  # e.g. an unprivileged sandbox maps only uid 0
        raise LookupError(f"cannot switch to user {spec} (uid {uid}): {exc.strerror}") from exc
    if entry and env.get("HOME") == "/root" and uid != 0 and len(entry) > 5:
        env["HOME"] = entry[5]


def _table(path: str) -> list[list[str]]:
    try:
        with open(path) as f:
            return [line.rstrip("\n").split(":") for line in f if line.count(":") >= 2]
    except OSError:
        return []


def direct_argv(req: dict) -> tuple[str, list[str], dict] | None:
    """(path, argv, env) for a plain command that needs no shell, else None (bash runs it).

    Plain: single-space-separated words of PLAIN_CHARS, the first no SHELL_WORDS entry, assignment
    or option, naming an executable file by path or on the request's PATH, looked up from the
    current dir (the shepherd is in the command's cwd by now). The env is what bash would export.
    Whatever bash would do differently is left to bash: a non-canonical cwd, BASH_ENV, exported
    functions, an SHLVL it resets, files without #! or ELF magic, an empty PATH entry.
    tests/sandbox/test_local_direct_argv.py checks all of it against ``bash -c``.
    """
    cmd, env = req["cmd"].strip(), req["env"]
    argv = cmd.split(" ")
    if not all(word and PLAIN_CHARS.issuperset(word) for word in argv) or not plain_shell_state(req):
        return None
    name = argv[0]
    if name in SHELL_WORDS or "=" in name or name.startswith("-"):
        return None
    path = find_executable(name, env.get("PATH", ""))
    if path is None:
        return None
    # What bash exports to a command it execs in place (it undoes its own SHLVL bump).
    shlvl = env.get("SHLVL", "0")
    extra = {"PWD": req["cwd"], "SHLVL": shlvl if shlvl.isdigit() else "0", "_": path}
    return path, argv, {**env, **extra}


def plain_shell_state(req: dict) -> bool:
    """Whether ``bash -c`` would run a plain command with nothing of its own: no BASH_ENV to source,
    no exported functions, an SHLVL it keeps, and a cwd that is already canonical (bash exports it as
    PWD resolved)."""
    env = req["env"]
    if "BASH_ENV" in env or any(key.startswith("BASH_FUNC_") for key in env):
        return False
    shlvl = env.get("SHLVL", "0")
    if shlvl.isdigit() and int(shlvl) >= 998:  # bash resets it (and warns)
        return False
    try:
        return os.getcwd() == req["cwd"]
    except OSError:  # the cwd is gone: bash says so
        return False


def find_executable(name: str, search: str) -> str | None:
    """The file bash would exec for ``name``: a path as given, else the first match on ``search``
    (an empty entry means the cwd, where bash's $0 becomes ``./name``: left to bash). None when there
    is none, or when it is no ELF or #! file (bash would run it as a script)."""
    dirs = [""] if "/" in name else search.split(":")
    for directory in dirs:
        if not directory and "/" not in name:
            return None
        path = os.path.join(directory, name) if directory else name
        if os.path.isfile(path) and os.access(path, os.X_OK):
            try:
                with open(path, "rb") as file:
                    head = file.read(4)
            except OSError:
                return None
            return path if head.startswith(EXEC_MAGIC) else None
    return None


def fork_shepherd(ctl: socket.socket, shell: str) -> socket.socket | None:
    """Fork the next shepherd ahead of time, so a command never waits for a fork of Python.

    None when nothing can be forked now (the pids or memory limit is reached); the caller retries.
    """
    init_end, shepherd_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        pid = os.fork()
    except OSError:
        init_end.close()
        shepherd_end.close()
        return None
    if pid:
        shepherd_end.close()
        return init_end
    try:
        init_end.close()
        ctl.close()
        open_own_oom_score()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        data, fds, _, _ = socket.recv_fds(shepherd_end, 1 << 20, 2)
        if data and fds:
            for fd in fds:
                os.set_inheritable(fd, False)
            with socket.socket(fileno=fds[0]) as reply:
                try:
                    shepherd(Wire.decode(data), reply, fds[1] if len(fds) > 1 else None, shell)
                except Exception as exc:
                    with contextlib.suppress(OSError):
                        reply.sendall(Wire.error(f"{type(exc).__name__}: {exc}"))
    finally:
        os._exit(0)


OOM_FD: int | None = None


def open_own_oom_score() -> None:
    """Keep this shepherd's oom_score_adj open, so the score its command inherits costs one write.

    /proc/self files of a non-dumpable process belong to host root; the shepherd is dumpable only
    for this open. (It is no easier to trace meanwhile: its full permitted capabilities are not a
    subset of any command's, so ptrace and /proc/<pid>/mem are refused to commands anyway.)
    """
    global OOM_FD
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    try:
        OOM_FD = os.open("/proc/self/oom_score_adj", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        OOM_FD = None
    finally:
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def hand_over(spare: socket.socket | None, data: bytes, fds: list[int]) -> bool:
    """Give a request to a spare shepherd; False if there is none or it was killed meanwhile."""
    if spare is None:
        return False
    try:
        socket.send_fds(spare, [data], fds)
    except OSError:
        return False
    finally:
        spare.close()
    return True


def serve(ctl: socket.socket, shell: str) -> None:
    spare = fork_shepherd(ctl, shell)
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(ctl, 1 << 20, 2)
        except InterruptedError:
            continue
        if not data:
            return
        if fds:
            if not hand_over(spare, data, fds):  # an agent may kill the spare (kill -9 -1)
                retry = fork_shepherd(ctl, shell)
                if not hand_over(retry, data, fds):
                    refuse(fds[0], "ares sandbox: cannot start the command: no process can be forked now\n")
            for fd in fds:
                os.close(fd)
            spare = fork_shepherd(ctl, shell)


# ---------------------------------------------------------------------- start-up
def become_namespace_root(cfg: dict) -> None:
    """Root-run sandboxes: take uid/gid 0 of the new namespace (a host id of the sandbox's range)."""
    if cfg["idmapped"]:
        os.setgroups([])
        os.setresgid(0, 0, 0)
        os.setresuid(0, 0, 0)


def scrub_cmdline() -> None:
    """Overwrite this process's argv memory with "ares-init", so /proc/1/cmdline inside the sandbox
    shows no host path (the interpreter and this script's location)."""
    with open("/proc/self/stat", "rb") as f:
        stat = f.read()
    fields = stat[stat.rfind(b")") + 2 :].split()
    start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (fields 48 and 49 of stat)
    title = b"ares-init"[: end - start - 1]
    ctypes.memset(start, 0, end - start)
    ctypes.memmove(start, title, len(title))


def main(ctl_fd: int, parent: int, zygote_child: bool = False) -> None:
    """Run the init on control socket ``ctl_fd``; ``parent`` (the host, or the zygote that forked us)
    must still be our parent once PR_SET_PDEATHSIG is set, or its death went unnoticed."""
    ctl = socket.socket(fileno=ctl_fd)
    scrub_cmdline()
    tie_to_parent(parent)
    try:
        cfg = build_sandbox(ctl, parent, zygote_child)
    except Exception as exc:
        Wire.stage(ctl, Wire.STAGE_ERROR, error=f"{type(exc).__name__}: {exc}")
        os._exit(1)
    pid1 = os.fork()
    if pid1:  # stay as the parent so pid 1 dies with us (and we die with the host)
        Wire.stage(ctl, Wire.STAGE_FORKED, pid=pid1)
        ctl.close()
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _, status = os.waitpid(pid1, 0)
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    try:
        shell = become_pid1(cfg)
        Wire.stage(ctl, Wire.STAGE_READY, shell=shell)
    except Exception as exc:
        Wire.stage(ctl, Wire.STAGE_ERROR, error=f"{type(exc).__name__}: {exc}")
        os._exit(1)
    serve(ctl, shell)
    os._exit(0)


def build_sandbox(ctl: socket.socket, parent: int, zygote_child: bool) -> dict:
    """The outer init's start-up steps (see the protocol above): new namespaces, id maps, the
    filesystem, cgroups. Returns the host's config."""
    fds: list[int] = []
    cfg = Wire.recv(ctl, fds)
    # Out of the OOM killer's reach, for pid 1 and every shepherd (needs root; unprivileged they
    # stay at 0, still below the commands' 500).
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
        f.write(str(cfg["oom_score_adj"]))
    with open("/proc/sys/kernel/cap_last_cap") as f:
        cfg["cap_last"] = int(f.read())
    flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET
    check(libc.unshare(flags), "unshare")
    Wire.stage(ctl, Wire.STAGE_UNSHARED)
    mapped = Wire.recv(ctl, fds)
    if mapped.get(Wire.OP) != Wire.OP_MAPPED:
        os._exit(1)
    setup_filesystem(cfg, fds, mapped.get("resolv"))
    if zygote_child:
        # Becoming the namespace's root (a new host euid) cleared PR_SET_PDEATHSIG. A direct
        # child relies on its control socket closing with the host; a zygote's must die with
        # the zygote, and the zygote is single-threaded and lives as long as the host.
        tie_to_parent(parent)
    for fd in fds:
        os.close(fd)
    if Wire.recv(ctl, fds).get(Wire.OP) != Wire.OP_LIMITED:
        os._exit(1)
    # Now that the host has put us in the sandbox's cgroups, they become the root of what
    # /proc/self/cgroup shows inside (no host cgroup path).
    check(libc.unshare(CLONE_NEWCGROUP), "unshare cgroup namespace")
    return cfg


def become_pid1(cfg: dict) -> str:
    """As pid 1: enter the sandbox's root, drop what a sandbox must not have; returns its shell."""
    enter_root(cfg)
    remove_files(cfg.get("remove", ()))
    harden(cfg)
    shell = next((s for s in ("/bin/bash", "/bin/sh") if os.path.exists(s)), None)
    if shell is None:
        raise FileNotFoundError("the image has neither /bin/bash nor /bin/sh")
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1):
        signal.signal(sig, signal.SIG_DFL)  # a pid namespace's init never gets these from inside
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps orphans for pid 1
    return shell


def tie_to_parent(parent: int) -> None:
    """SIGKILL when ``parent`` dies; exit now if it already has (we were re-parented meanwhile)."""
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


# ---------------------------------------------------------------------- zygote
# Run as ``python -I -S _init.py --zygote FD HOST_PID OOM_SCORE_ADJ``: one per host process, it pays
# the interpreter start and the imports above once and forks a ready init per sandbox.
# Request on FD: marshal {"op": "spawn"} + fds [control socket, init.log, reply socket].
# Reply on the reply socket: {"pid": pid} + a pidfd of the child (opened before the child can be
# reaped, so it never names a recycled pid), or {"error": message}. EOF on FD ends the zygote.
def zygote(sock_fd: int, host_pid: int, oom_score_adj: int) -> None:
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # and through theirs, every init with it
    if os.getppid() != host_pid:
        os._exit(1)
    close_fds_except({0, 1, 2, sock_fd})
    signal.pthread_sigmask(signal.SIG_SETMASK, ())  # whatever the host thread blocked
    # Out of the OOM killer's reach like the inits (needs root): its death would end every sandbox.
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
        f.write(str(oom_score_adj))
    # What a fresh interpreter has; each child gets exactly this back.
    fresh = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGCHLD)}
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C is the host's to handle
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # only wakes the loop, which reaps
    sock = socket.socket(fileno=sock_fd)
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    while True:
        for fd, _ in poller.poll():
            if fd == wake_r:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 4096)
                reap({})
                continue
            data, fds, _, _ = socket.recv_fds(sock, 4096, 3)
            if not data:
                os._exit(0)
            if len(fds) == 3:
                fork_init(sock, fds, fresh)
            for got in fds:
                os.close(got)


def fork_init(sock: socket.socket, fds: list[int], fresh: dict) -> None:
    """Fork a child that becomes what ``python -I -S _init.py FD`` is, and answer with its pid."""
    ctl, log, reply = fds
    zygote_pid = os.getpid()
    try:
        pid = os.fork()
    except OSError as exc:  # e.g. the host's pids limit
        answer(reply, {"error": f"cannot fork the sandbox init: {exc.strerror}"}, [])
        return
    if pid == 0:
        try:
            signal.set_wakeup_fd(-1)  # before its pipe closes: a signal must never write to a reused fd
            for sig, handler in fresh.items():
                signal.signal(sig, handler)
            sock.detach()  # its fd closes below; the object must never close that number again
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.dup2(ctl, 3)
            close_fds_except({0, 1, 2, 3})
            os.chdir("/")
            main(3, zygote_pid, zygote_child=True)
        finally:
            os._exit(1)
    pidfd = os.pidfd_open(pid)  # not reaped yet: the loop only reaps after this returns
    try:
        answer(reply, {"pid": pid}, [pidfd])
    finally:
        os.close(pidfd)


def answer(reply: int, msg: dict, fds: list[int]) -> None:
    """Send the zygote's reply; a host that gave up on the request (closed its end) is not an error."""
    with contextlib.suppress(OSError), socket.socket(fileno=os.dup(reply)) as s:
        socket.send_fds(s, [Wire.encode(msg)], fds)


def close_fds_except(keep: set[int]) -> None:
    for name in os.listdir("/proc/self/fd"):
        if int(name) not in keep:
            with contextlib.suppress(OSError):  # the listing's own fd is already closed
                os.close(int(name))


if __name__ == "__main__":
    if sys.argv[1] == "--zygote":
        zygote(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    else:
        main(int(sys.argv[1]), os.getppid())
