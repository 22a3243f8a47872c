"""Run untrusted Python in a confined child process and exchange only plain data with it.

Why: a checker that imports the code it grades can be beaten from inside its own process (patched
builtins, objects whose ``==`` is always true, early exits, peeking at the checker's frames). Here
the candidate module runs in a separate ``python3 -I`` process that confines itself (Landlock, else
an unprivileged uid) before importing it, and only plain data crosses back through a strict codec,
so the trusted process compares real ints, strs and lists that it decoded itself.

Stdlib only (Python >= 3.9, Linux), so a task's tests can ship this file next to their checker:

    with Candidate("/app", "stats") as stats:  # spawns the confined server process
        assert stats.call("median", [4, 1, 3, 2]) == 2.5

The server can also be started by hand: ``python3 -I -B isolated.py --serve RFD WFD MODE DIR MODULE``.
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs milliseconds at start-up; only type checkers need it
    from typing import NoReturn

MAX_DEPTH = 100  # containers nested deeper than this are refused
MAX_FRAME = 64 << 20  # bytes in one message
CONFINED_WRITES = ("/tmp", "/dev")  # where the candidate may write (/dev/null must keep working)
HIDDEN = ("/tests", "/logs")  # hidden from the candidate in addition to this file's directory


class CodecError(ValueError):
    """Bytes that are not a valid encoding, or a value that is not plain data."""


class CandidateError(Exception):
    """The candidate did something other than return plain data (e.g. returned an object)."""


class CandidateRaised(CandidateError):
    """The candidate's function raised; ``names`` are its exception class and bases, by name."""

    def __init__(self, message: str, names: tuple[str, ...]) -> None:
        super().__init__(message)
        self.names = names


class CandidateFailed(CandidateError):
    """The candidate process crashed, timed out or broke the protocol; it has been killed."""


# --- codec ----------------------------------------------------------------------------------------
# value := n | t | f | TAG LEN ':' payload (i: hex int, d: float.hex, s: UTF-8, b: bytes)
#        | TAG COUNT ':' value* (l list, u tuple, e set, z frozenset; m dict: COUNT key/value pairs)
# LEN and COUNT are ASCII decimals without leading zeros. Every scalar must be in canonical form.

_CONTAINERS = {list: b"l", tuple: b"u", set: b"e", frozenset: b"z", dict: b"m"}


def encode(value: object) -> bytes:
    """The bytes of ``value``, which must be plain data of exact built-in types (no subclasses)."""
    out: list[bytes] = []
    _encode(value, out, MAX_DEPTH)
    return b"".join(out)


def _encode(value: object, out: list[bytes], depth: int) -> None:
    kind = type(value)
    if value is None:
        out.append(b"n")
    elif kind is bool:
        out.append(b"t" if value else b"f")
    elif kind is int:
        _blob(b"i", format(value, "x").encode(), out)
    elif kind is float:
        _blob(b"d", value.hex().encode(), out)  # type: ignore[attr-defined]
    elif kind is str:
        _blob(b"s", value.encode("utf-8", "surrogatepass"), out)  # type: ignore[attr-defined]
    elif kind is bytes:
        _blob(b"b", value, out)  # type: ignore[arg-type]
    elif kind in _CONTAINERS:
        if depth <= 0:
            raise CodecError(f"nested deeper than {MAX_DEPTH} levels")
        out.append(b"%s%d:" % (_CONTAINERS[kind], len(value)))  # type: ignore[arg-type]
        if kind is dict:
            for key, item in value.items():  # type: ignore[attr-defined]
                _encode(key, out, depth - 1)
                _encode(item, out, depth - 1)
        else:
            for item in value:  # type: ignore[attr-defined]
                _encode(item, out, depth - 1)
    else:
        raise CodecError(f"a {kind.__qualname__} is not plain data")


def _blob(tag: bytes, payload: bytes, out: list[bytes]) -> None:
    out.append(b"%s%d:" % (tag, len(payload)))
    out.append(payload)


def decode(data: bytes) -> object:
    """The value encoded in ``data``; raises CodecError for anything but one canonical value."""
    if type(data) is not bytes:
        raise CodecError(f"expected bytes, got {type(data).__qualname__}")
    if len(data) > MAX_FRAME:
        raise CodecError(f"{len(data)} bytes is more than the {MAX_FRAME}-byte limit")
    value, end = _decode(data, 0, MAX_DEPTH)
    if end != len(data):
        raise CodecError(f"{len(data) - end} trailing bytes after the value")
    return value


def _decode(data: bytes, pos: int, depth: int) -> tuple[object, int]:
    if pos >= len(data):
        raise CodecError("truncated input")
    tag = data[pos : pos + 1]
    pos += 1
    if tag == b"n":
        return None, pos
    if tag == b"t":
        return True, pos
    if tag == b"f":
        return False, pos
    colon = data.find(b":", pos, pos + 11)
    digits = data[pos:colon]
    if colon < 0 or not digits.isdigit() or (digits[:1] == b"0" and len(digits) > 1):
        raise CodecError(f"bad tag {tag!r} or length at byte {pos - 1}")
    size, pos = int(digits), colon + 1
    if size > len(data) - pos:
        raise CodecError(f"length {size} at byte {colon} runs past the end of the input")
    if tag in b"idsb":
        return _scalar(tag, data[pos : pos + size], pos), pos + size
    if tag not in b"luezm" or len(tag) != 1:
        raise CodecError(f"unknown tag {tag!r} at byte {pos - len(digits) - 2}")
    if depth <= 0:
        raise CodecError(f"nested deeper than {MAX_DEPTH} levels")
    if tag == b"m":
        result: dict[object, object] = {}
        for _ in range(size):
            key, pos = _decode(data, pos, depth - 1)
            item, pos = _decode(data, pos, depth - 1)
            try:
                if key in result:
                    raise CodecError(f"duplicate dict key {key!r}")
                result[key] = item
            except TypeError:
                raise CodecError(f"unhashable dict key of type {type(key).__qualname__}") from None
        return result, pos
    items = []
    for _ in range(size):
        item, pos = _decode(data, pos, depth - 1)
        items.append(item)
    if tag == b"l":
        return items, pos
    if tag == b"u":
        return tuple(items), pos
    try:
        members = set(items) if tag == b"e" else frozenset(items)
    except TypeError:
        raise CodecError("unhashable set member") from None
    if len(members) != size:
        raise CodecError("duplicate set member")
    return members, pos


def _scalar(tag: bytes, payload: bytes, pos: int) -> object:
    if tag == b"b":
        return payload
    try:
        if tag == b"s":
            return payload.decode("utf-8", "surrogatepass")  # strict UTF-8 apart from lone surrogates
        text = payload.decode("ascii")
        value: int | float = int(text, 16) if tag == b"i" else float.fromhex(text)
        # Only the canonical spelling is accepted, so each value has exactly one encoding.
        if (format(value, "x") if tag == b"i" else value.hex()) == text:  # type: ignore[union-attr]
            return value
    except ValueError:
        pass
    kind = {b"i": "int", b"d": "float", b"s": "str"}[tag]
    raise CodecError(f"malformed {kind} {payload[:40]!r} at byte {pos}")


def _frame(payload: bytes) -> bytes:
    if len(payload) > MAX_FRAME:
        raise CodecError(f"{len(payload)} bytes is more than the {MAX_FRAME}-byte limit")
    return len(payload).to_bytes(4, "big") + payload


# --- confinement (runs in the candidate process, before any candidate code) -----------------------

_READ = 1 | 4 | 8  # LANDLOCK_ACCESS_FS_EXECUTE | READ_FILE | READ_DIR
_FILE_RIGHTS = 1 | 2 | 4 | (1 << 14) | (1 << 15)  # rights that apply to a non-directory
_NOBODY = 65534


def confine(mode: str, hidden: list[str], writable: tuple[str, ...] = CONFINED_WRITES) -> tuple[str, str]:
    """Restrict this process before untrusted code runs; returns (kind, detail), kind being one of
    "landlock", "uid" or "none". ``mode`` "auto" tries Landlock, then dropping root to uid 65534."""
    hidden = [os.path.realpath(path) for path in hidden]
    problems: list[str] = []
    try:  # before any uid change: loading libc may need files only root can read
        _c("prctl", 38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS: nothing exec'd later gains privileges
    except (OSError, ImportError, AttributeError) as exc:
        problems.append(f"no_new_privs: {exc}")
    kind = "none"
    if mode in ("auto", "landlock"):
        try:
            kind, detail = "landlock", _landlock(hidden, writable)
        except (OSError, ImportError, AttributeError, KeyError) as exc:
            problems.append(f"landlock: {exc}")
    if kind == "none" and mode in ("auto", "uid"):
        try:
            kind, detail = "uid", _drop_to_nobody()
        except OSError as exc:
            problems.append(f"uid: {exc}")
    if kind == "none":
        return kind, "; ".join(problems) or f"confinement mode {mode!r}"
    try:
        _c("prctl", 1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG = SIGKILL (after a uid change, which clears it)
    except (OSError, ImportError, AttributeError, KeyError) as exc:
        detail += f"; no parent-death signal ({exc})"  # the checker still kills its process group
    return kind, detail


_C_FUNCTIONS: dict[str, object] = {}


def _c(name: str, *args: object) -> int:
    """Calls libc's ``name`` (syscall, prctl) with int/bytes/None arguments; raises OSError
    when it returns a negative number."""
    if not _C_FUNCTIONS:
        _C_FUNCTIONS.update(_load_libc())
    function, get_errno = _C_FUNCTIONS[name], _C_FUNCTIONS["get_errno"]
    result = function(*args)  # type: ignore[operator]
    if result < 0:
        errno = get_errno()  # type: ignore[operator]
        raise OSError(errno, f"{name}{args[:1]}: {os.strerror(errno)}")
    return result


def _load_libc() -> dict[str, object]:
    try:  # _ctypes itself: importing the ctypes package would add ~3 ms to the candidate's start-up
        import _ctypes

        class Long(_ctypes._SimpleCData):  # type: ignore[name-defined,misc]
            _type_ = "l"

        class Function(_ctypes.CFuncPtr):  # type: ignore[name-defined,misc]
            _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
            _restype_ = Long

        class Libc:
            _handle = _ctypes.dlopen(None, os.RTLD_NOW)

        found = {name: Function((name, Libc)) for name in ("syscall", "prctl")}
        return {**found, "get_errno": _ctypes.get_errno}
    except (ImportError, AttributeError, TypeError, OSError):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = libc.prctl.restype = ctypes.c_long
        return {"syscall": libc.syscall, "prctl": libc.prctl, "get_errno": ctypes.get_errno}


def _landlock(hidden: list[str], writable: tuple[str, ...]) -> str:
    abi = _c("syscall", 444, None, 0, 1)  # landlock_create_ruleset(NULL, 0, VERSION)
    handled = (1 << 13) - 1  # ABI 1: EXECUTE .. MAKE_SYM
    for min_abi, right in ((2, 1 << 13), (3, 1 << 14), (5, 1 << 15)):  # REFER, TRUNCATE, IOCTL_DEV
        if abi >= min_abi:
            handled |= right
    scoped = 1 | 2 if abi >= 6 else 0  # abstract unix sockets, signals
    order = sys.byteorder
    attr = handled.to_bytes(8, order) + bytes(8) + scoped.to_bytes(8, order)
    ruleset = _c("syscall", 444, attr, 24 if scoped else 8, 0)
    try:
        for rights, roots in ((_READ, ("/",)), (handled, writable)):
            for path in _beneath(roots, hidden):
                _allow(ruleset, path, rights)
        _c("syscall", 446, ruleset, 0)  # landlock_restrict_self (needs no_new_privs, set above)
    finally:
        os.close(ruleset)
    return f"ABI {abi}, signals/sockets scoped: {bool(scoped)}"


def _beneath(roots: tuple[str, ...], hidden: list[str]) -> list[str]:
    """The fewest paths whose subtrees cover ``roots`` but none of ``hidden`` (Landlock only
    allows, so a root holding a hidden path is replaced by its other entries, recursively).

    Other processes' /proc/PID dirs are left out too: Landlock does not stop reading a same-uid
    process's environ there, and the verifier's env (which may carry hidden tests) lives in it."""
    found: list[str] = []
    own = str(os.getpid())

    def walk(path: str) -> None:
        if path in hidden:
            return
        prefix = path.rstrip("/") + "/"
        if path != "/proc" and not any(other.startswith(prefix) for other in hidden):
            found.append(path)
            return
        try:
            names = os.listdir(path)
        except OSError:
            return
        for name in names:
            child = prefix + name
            if path == "/proc" and name.isdigit() and name != own:
                continue
            if not os.path.islink(child):  # a link is resolved at access time, against the rules
                walk(child)

    for root in roots:
        if os.path.isdir(root):
            walk(os.path.realpath(root))
    return found


def _allow(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return  # vanished or unreachable: nothing to allow
    try:
        if (os.fstat(fd).st_mode & 0o170000) != 0o040000:
            rights &= _FILE_RIGHTS
        attr = rights.to_bytes(8, sys.byteorder) + fd.to_bytes(4, sys.byteorder)
        _c("syscall", 445, ruleset, 1, attr, 0)  # landlock_add_rule(PATH_BENEATH)
    finally:
        os.close(fd)


def _drop_to_nobody() -> str:
    if os.getuid() != 0:
        raise OSError(1, f"running as uid {os.getuid()}, not root; cannot switch users")
    try:
        os.setgroups([])
    except OSError:
        if set(os.getgroups()) - {_NOBODY}:
            raise
    os.setresgid(_NOBODY, _NOBODY, _NOBODY)
    os.setresuid(_NOBODY, _NOBODY, _NOBODY)
    return f"uid/gid {_NOBODY}"


# --- the candidate server: _serve([RFD, WFD, MODE, MODULE_DIR, MODULE, HIDDEN...]) --------------------


def _describe(exc: BaseException) -> str:
    try:
        text = str(exc)
    except BaseException:
        text = "<unprintable>"
    name = type(exc).__name__
    return f"{name}: {text}"[:2000] if text else name


def _serve(argv: list[str]) -> int:
    rfd, wfd = int(argv[0]), int(argv[1])
    mode, module_dir, module, hidden = argv[2], argv[3], argv[4], argv[5:]
    low, high = sorted((rfd, wfd))
    for start, stop in ((3, low), (low + 1, high), (high + 1, 1 << 20)):
        os.closerange(start, stop)  # nothing but stdio and our two pipes reaches candidate code

    def send(payload: bytes) -> None:
        for stream in (sys.stdout, sys.stderr):  # so the checker's output tail is current
            try:
                stream.flush()
            except BaseException:  # the candidate may have replaced or closed them
                continue
        data = memoryview(_frame(payload))
        while data:
            data = data[os.write(wfd, data) :]

    def read_exact(size: int) -> bytes | None:
        data = bytearray()
        while len(data) < size:
            chunk = os.read(rfd, min(size - len(data), 1 << 20))
            if not chunk:
                return None
            data += chunk
        return bytes(data)

    send(encode(("confined", *confine(mode, hidden))))
    sys.path.insert(0, module_dir)  # after our own imports, so the candidate cannot shadow them
    try:
        __import__(module)
        target = sys.modules[module]
    except BaseException as exc:  # SystemExit and KeyboardInterrupt at import are failures too
        send(encode(("import-error", _describe(exc))))
        return 1
    send(encode(("ready",)))
    while (header := read_exact(4)) is not None:
        request = read_exact(int.from_bytes(header, "big"))
        if request is None:
            break
        name, args, kwargs = decode(request)  # type: ignore[misc]
        try:
            result = getattr(target, name)(*args, **kwargs)
        except BaseException as exc:
            send(encode(("raise", _describe(exc), tuple(c.__name__ for c in type(exc).__mro__))))
            continue
        try:
            reply = encode(("ok", result))
        except CodecError as exc:
            reply = encode(("error", f"{name}() returned something that is not plain data ({exc})"))
        send(reply)
    return 0


# Imports this file as a module rather than running it as a script, so a cached .pyc next to it is
# used (compiling it costs the candidate milliseconds); -I keeps cwd and user site off sys.path.
_BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv[1]); server = __import__(sys.argv[2]); del sys.path[0]; "
    "sys.exit(server._serve(sys.argv[3:]))"
)

# --- the trusted client ---------------------------------------------------------------------------


class Candidate:
    """A candidate module in a confined child process; ``call`` runs one of its functions there.

    Every call shares the overall ``timeout_s`` budget; ``call_timeout_s`` bounds each call too.
    The child's stdout/stderr are drained (the last ``output_limit`` bytes kept for messages).
    """

    def __init__(
        self,
        module_dir: str,
        module: str,
        *,
        timeout_s: float = 40.0,
        call_timeout_s: float | None = None,
        hide: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        confine: str = "auto",
        python: str | None = None,
        output_limit: int = 4096,
    ) -> None:
        self.module = module
        self.timeout_s = timeout_s
        self.call_timeout_s = call_timeout_s
        self.deadline = time.monotonic() + timeout_s
        self.confinement: str | None = None
        self.confinement_detail = ""
        self.failure: str | None = None
        self._ready = False
        self._inbox = bytearray()
        self._output = bytearray()
        self._output_limit = output_limit
        hidden = [*HIDDEN, os.path.dirname(os.path.abspath(__file__)), *hide]
        if os.environ.get("ARES_LOGS_DIR"):
            hidden.append(os.environ["ARES_LOGS_DIR"])
        req_r, self._req_w = os.pipe()
        self._rep_r, rep_w = os.pipe()
        self._out_r, out_w = os.pipe()
        here, name = os.path.split(os.path.abspath(__file__))
        argv = [python or sys.executable, "-I", "-B", "-c", _BOOTSTRAP, here, name.partition(".")[0]]
        argv += [str(req_r), str(rep_w), confine, os.path.abspath(module_dir), module, *hidden]
        try:
            os.set_inheritable(req_r, True)
            os.set_inheritable(rep_w, True)
            self.pid = os.posix_spawn(
                argv[0],
                argv,
                dict(os.environ) if env is None else env,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, out_w, 1),
                    (os.POSIX_SPAWN_DUP2, out_w, 2),
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                ],
                setsid=True,  # its own session and process group, killed as a whole
            )
        finally:
            for fd in (req_r, rep_w, out_w):
                os.close(fd)
        self._status: int | None = None
        try:
            self._pidfd: int | None = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            self._pidfd = None
        for fd in (self._req_w, self._rep_r, self._out_r):
            os.set_blocking(fd, False)

    def __enter__(self) -> Candidate:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def output(self) -> str:
        """The tail of what the candidate printed (stdout and stderr interleaved)."""
        return self._output.decode("utf-8", "replace")

    def wait_ready(self) -> None:
        """Wait until the candidate module is imported; raises CandidateFailed if that failed."""
        if self._ready:
            return
        if self.failure is not None:
            raise CandidateFailed(self.failure)
        if self.confinement is None:
            hello = self._exchange(None, self.deadline, "starting")
            if type(hello) is not tuple or len(hello) != 3 or hello[0] != "confined" or not _strs(hello):
                self._fail(f"the candidate process sent {_short(hello)} instead of its confinement")
            self.confinement, self.confinement_detail = hello[1], hello[2]
        reply = self._exchange(None, self.deadline, f"importing {self.module}")
        if reply == ("ready",):
            self._ready = True
            return
        if type(reply) is tuple and len(reply) == 2 and reply[0] == "import-error":
            self._fail(f"importing {self.module} failed: {reply[1]}")
        self._fail(f"the candidate process sent {_short(reply)} instead of an import result")

    def call(self, name: str, /, *args: object, **kwargs: object) -> object:
        """``module.name(*args, **kwargs)`` in the candidate process; arguments and result must be
        plain data. Raises CandidateRaised if it raised, CandidateFailed if the process failed."""
        return self.invoke(name, args, kwargs)

    def invoke(
        self, name: str, args: tuple[object, ...], kwargs: dict[str, object], timeout_s: float | None = None
    ) -> object:
        """Like ``call``, with an explicit per-call timeout (default ``call_timeout_s``)."""
        self.wait_ready()
        request = encode((name, tuple(args), dict(kwargs)))
        limit = self.call_timeout_s if timeout_s is None else timeout_s
        deadline = self.deadline if limit is None else min(self.deadline, time.monotonic() + limit)
        reply = self._exchange(request, deadline, f"{name}()")
        if type(reply) is tuple:
            if len(reply) == 2 and reply[0] == "ok":
                return reply[1]
            if len(reply) == 3 and reply[0] == "raise" and type(reply[1]) is str:
                names = reply[2]
                if type(names) is tuple and _strs(names):
                    raise CandidateRaised(f"{name}() raised {reply[1]}", names)
            if len(reply) == 2 and reply[0] == "error" and type(reply[1]) is str:
                raise CandidateError(reply[1])
        self._fail(f"the candidate process answered {name}() with {_short(reply)}")

    def function(self, name: str) -> Remote:
        """A callable standing in for the candidate's ``name`` (for checks that take a function)."""
        return Remote(self, name)

    def close(self) -> None:
        """Kill the candidate's whole process group and release its pipes (idempotent)."""
        if self._status is None:
            self._drain_output()
            _kill_group(self.pid)
            self._status = os.waitpid(self.pid, 0)[1]
        for name in ("_req_w", "_rep_r", "_out_r", "_pidfd"):
            fd = getattr(self, name)
            if fd is not None:
                os.close(fd)
                setattr(self, name, None)

    # -- internals --

    def _fail(self, message: str) -> NoReturn:
        self._drain_output()
        self.close()
        tail = self.output.strip()
        self.failure = message
        raise CandidateFailed(f"{message}\n--- candidate output (tail) ---\n{tail}" if tail else message)

    def _drain_output(self) -> None:
        """Read what the candidate has printed so far (bounded: it may still be printing)."""
        try:
            for _ in range(16):
                chunk = os.read(self._out_r, 65536) if self._out_r is not None else b""
                if not chunk:
                    return
                self._keep_output(chunk)
        except OSError:  # BlockingIOError: nothing more for now
            return

    def _drain_replies(self) -> None:
        try:
            while chunk := os.read(self._rep_r, 1 << 20):  # type: ignore[arg-type]
                self._inbox += chunk
        except BlockingIOError:
            pass

    def _keep_output(self, chunk: bytes) -> None:
        self._output += chunk
        if len(self._output) > self._output_limit:
            del self._output[: -self._output_limit]

    def _take_frame(self) -> bytes | None:
        if len(self._inbox) < 4:
            return None
        size = int.from_bytes(self._inbox[:4], "big")
        if size > MAX_FRAME:
            self._fail(f"the candidate process sent a {size}-byte message (limit {MAX_FRAME})")
        if len(self._inbox) < 4 + size:
            return None
        frame = bytes(self._inbox[4 : 4 + size])
        del self._inbox[: 4 + size]
        return frame

    def _exchange(self, request: bytes | None, deadline: float, what: str) -> object:
        import select

        if self.failure is not None:
            raise CandidateFailed(self.failure)
        pending = memoryview(_frame(request) if request is not None else b"")
        exited = False
        while True:
            frame = None if pending else self._take_frame()
            if frame is not None:
                try:
                    return decode(frame)
                except CodecError as exc:
                    self._fail(f"the candidate process sent a malformed message while {what}: {exc}")
            if exited:
                self._fail(f"the candidate process {_exit_text(self._reap())} while {what}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if deadline >= self.deadline:
                    self._fail(f"timed out after {self.timeout_s:g}s (while {what})")
                self._fail(f"{what} did not finish within its time limit")
            poller = select.poll()
            poller.register(self._rep_r, select.POLLIN)
            if self._out_r is not None:
                poller.register(self._out_r, select.POLLIN)
            if pending:
                poller.register(self._req_w, select.POLLOUT)
            if self._pidfd is not None:
                poller.register(self._pidfd, select.POLLIN)
            for fd, _event in poller.poll(max(1, int(remaining * 1000) + 1)):
                if fd == self._rep_r:
                    chunk = os.read(fd, 1 << 20)
                    self._inbox += chunk
                    exited = exited or not chunk
                elif fd == self._out_r:
                    chunk = os.read(fd, 65536)
                    if chunk:
                        self._keep_output(chunk)
                    else:
                        os.close(fd)
                        self._out_r = None
                elif fd == self._req_w:
                    try:
                        pending = pending[os.write(fd, pending[: 1 << 16]) :]
                    except BrokenPipeError:
                        exited = True
                else:  # the pidfd: the candidate exited, maybe right after writing a reply
                    exited = True
                    self._drain_replies()

    def _reap(self) -> int:
        if self._status is None:
            _kill_group(self.pid)
            self._drain_output()
            self._status = os.waitpid(self.pid, 0)[1]
        return self._status


class Remote:
    """A stand-in for one candidate function: calling it calls the function in the candidate."""

    def __init__(self, candidate: Candidate, name: str) -> None:
        self._candidate = candidate
        self.__name__ = name

    def __call__(self, *args: object, **kwargs: object) -> object:
        return self._candidate.invoke(self.__name__, args, kwargs)

    def __repr__(self) -> str:
        return f"<candidate function {self.__name__}>"


def _strs(values: tuple[object, ...]) -> bool:
    return all(type(value) is str for value in values)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, 9)  # SIGKILL; the group outlives its leader while any member is alive
    except OSError:
        return  # already gone


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def _exit_text(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    return f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"


if __name__ == "__main__" and sys.argv[1:2] == ["--serve"]:
    sys.exit(_serve(sys.argv[2:]))
