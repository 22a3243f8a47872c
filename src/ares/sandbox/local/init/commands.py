"""One command in the sandbox: the shepherd that runs it (its cwd, user, rlimits and signals) and the
shortcut that execs a command of plain words directly instead of through bash. Standard library only."""

import contextlib
import os
import resource
import signal
import socket
import time

from .capture import Capture, collect, discard_until_closed
from .kernel import PR_SET_DUMPABLE, libc
from .wire import Wire

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
