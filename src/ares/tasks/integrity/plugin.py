# ruff: noqa: UP031, UP004, SIM105, RUF005
"""ARES's integrity plugin for pytest-graded runs: the test process's own account of what ran.

This file is never imported by ARES. The verifier copies it, under a name drawn per verification, into
a read-only dir of the grader's sandbox and the eval script loads it with ``-p`` (through
``PYTEST_ADDOPTS``), so that it is imported before any conftest, entry-point plugin or project module.
It runs under the image's Python and pytest, hence plain Python 3.5 syntax and the standard library
only; on an interpreter or pytest it cannot serve it disarms itself and says so.

At import it prints one ``ares-integrity: armed`` line to the real stdout (the agent's code runs later
and cannot take bytes back from a pipe), opens its report file (the channel, before collection),
snapshots what pytest and pluggy are made of (functions, classes, their methods and code objects) and
installs an audit hook (PEP 578; it cannot be removed). During the run it records each test's outcome
from the ``CallInfo`` of each phase, independently of the report objects that other code may rewrite,
and checks, per test and at the end: the snapshot, the hook implementations (none may come from outside
pytest's own plugin loading and the image's conftest files), each item's own methods, tracing and
profiling hooks and import hooks installed by the agent's files, and writes the report at the very end.
An exit that skips the end leaves no report, which the grader scores as tampering.

PYTEST_DONT_REWRITE: pytest would rewrite this module's asserts (it has none) as a ``-p`` plugin,
which costs a parse and a compile per run (its dir is read-only, so no cached pyc): this word in the
docstring turns that off.

The agent's files are the ones the grader's diff names (``changed.txt``, from the host): audit events
are charged to them by the Python frame that raised them.
"""

import json
import os
import sys
from itertools import chain, repeat
from operator import attrgetter, getitem, is_

PROTECTED_NAMES = ("conftest.py", "pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml")
WATCHED_EVENTS = frozenset(
    [
        "open",
        "os.rename",
        "os.remove",
        "os.truncate",
        "os.symlink",
        "os.link",
        "shutil.rmtree",
        "sys.settrace",
        "sys.setprofile",
        "sys.monitoring.register_callback",
        "sys._getframe",
        "sys._current_frames",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "object.__setattr__",
        "object.__delattr__",
        "ctypes.dlsym",
        "ctypes.addressof",
        "ctypes.cdata",
        "ctypes.string_at",
        "ctypes.call_function",
    ]
)
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
MAX_FINDINGS = 50
#: Modules checked before every test (what runs, reports and rewrites a test); the rest of pytest and
#: pluggy (the terminal and assertion messages among them: a verdict never depends on what they print)
#: is checked every ``FULL_CHECK_EVERY`` tests and at the end.
HOT_MODULES = frozenset(
    [
        "_pytest.runner",
        "_pytest.reports",
        "_pytest.python",
        "_pytest.main",
        "_pytest.skipping",
        "_pytest.outcomes",
        "_pytest.nodes",
        "_pytest.assertion.rewrite",
        "pluggy._callers",
        "pluggy._caller",
        "pluggy._execution",
        "pluggy._hooks",
        "pluggy._manager",
        "pluggy._result",
    ]
)
FULL_CHECK_EVERY = 25
#: Hooks checked before every test (the rest every ``FULL_CHECK_EVERY`` tests and at the end).
HOT_HOOKS = (
    "pytest_runtest_protocol",
    "pytest_runtest_setup",
    "pytest_runtest_call",
    "pytest_runtest_teardown",
    "pytest_runtest_makereport",
    "pytest_runtest_logreport",
    "pytest_report_teststatus",
    "pytest_pyfunc_call",
    "pytest_collection_modifyitems",
    "pytest_terminal_summary",
    "pytest_sessionfinish",
    "pytest_unconfigure",
)


def _is_runner_module(name):
    return name == "pytest" or name.startswith(("_pytest", "pluggy"))


def _entry(key, holder, name, value):
    """A snapshot entry: the value, and the function behind it with its code object (or None)."""
    func = _code_of(value)
    return (key, holder, name, value, func, func.__code__ if func is not None else None)


class Integrity(object):
    def __init__(self, out_dir, module_name):
        self.out_dir = out_dir
        self.module_name = module_name
        self.workdir = os.getcwd()
        self.nonce = _read_and_remove(os.path.join(out_dir, "nonce")).strip()
        changed = _read_and_remove(os.path.join(out_dir, "changed.txt"))
        self.changed = frozenset(
            os.path.normpath(os.path.join(self.workdir, line))
            for line in changed.splitlines()
            if line.strip()
        )
        roots = _read_and_remove(os.path.join(out_dir, "roots.txt"))
        self.test_roots = tuple(
            os.path.normpath(os.path.join(self.workdir, line)) for line in roots.splitlines() if line.strip()
        )
        self.plugin_dir = os.path.dirname(os.path.abspath(__file__))
        self.fd = os.open(os.path.join(out_dir, "report.json"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        self.findings = []
        self.seen_findings = set()
        self.tests = {}
        self.busy = False
        self.started = False
        self.known_impls = set()
        self.hook_impls = {}
        self.hot_hooks = None
        surface = self._surface()
        hot = HOT_MODULES | {module_name}
        self.hot = _Part([entry for entry in surface if entry[0][0] in hot])
        self.rest = _Part([entry for entry in surface if entry[0][0] not in hot])
        self.checked = 0
        self.meta_path = [id(x) for x in sys.meta_path]
        self.path_hooks = [id(x) for x in sys.path_hooks]
        self.last_meta_path = list(sys.meta_path)
        self.last_path_hooks = list(sys.path_hooks)
        self.agent_classes = {}
        import builtins

        self.builtins = builtins
        self.import_func = builtins.__import__
        self.call_info_types = ()

    # -- what pytest is made of ------------------------------------------------------------------
    def _surface(self):
        """(key, holder dict, name, value, code) for every function, class and method pytest and
        pluggy (and this plugin) define; the holders are live views, so a check is a dict lookup."""
        out = []
        for name, module in list(sys.modules.items()):
            if module is None or not (_is_runner_module(name) or name == self.module_name):
                continue
            holder = vars(module)
            for attr, value in list(holder.items()):
                if getattr(value, "__module__", None) != name:
                    continue
                if isinstance(value, type):
                    out.append(((name, attr), holder, attr, value, None, None))
                    members = vars(value)
                    for key, member in list(members.items()):
                        if callable(member) or isinstance(member, (classmethod, staticmethod, property)):
                            out.append(_entry((name, attr, key), members, key, member))
                elif callable(value):
                    out.append(_entry((name, attr), holder, attr, value))
        return out

    def check_surface(self, full=True, codes=True):
        """Compare with the snapshot. pytest and its plugins patch pytest's classes too (``legacypath``
        in its ``pytest_configure``, hypothesis's plugin): a new value whose code is not from the
        agent's files is taken in; a removal, a value without code, or the agent's code is not.
        Between tests ``codes`` is off: reading ``__code__`` raises an audit event per function, and
        a code swap is judged by the audit hook as it happens; the final check reads them all."""
        for part in (self.hot, self.rest) if full else (self.hot,):
            if not part.unchanged(codes):
                self._check_entries(part.entries)
                part.regroup()

    def _check_entries(self, entries):
        for index, (key, holder, name, value, func, code) in enumerate(entries):
            if holder.get(name, _MISSING) is value and (func is None or func.__code__ is code):
                continue
            current = holder.get(name, _MISSING)
            new_code = _code_of(current) if current is not _MISSING else None
            if new_code is not None and not self.agent_code(new_code):
                entries[index] = _entry(key, holder, name, current)
                continue
            self.tamper("runner_changed", "%s was replaced or removed" % ".".join(key))

    # -- findings --------------------------------------------------------------------------------
    def tamper(self, kind, detail):
        key = (kind, detail)
        if key in self.seen_findings or len(self.findings) >= MAX_FINDINGS:
            return
        self.seen_findings.add(key)
        self.findings.append({"kind": kind, "detail": detail})

    def agent_file(self, filename):
        return filename in self.changed

    def agent_code(self, func):
        code = getattr(getattr(func, "__func__", func), "__code__", None)
        return code is not None and self.agent_file(code.co_filename)

    def agent_class(self, obj):
        kind = type(obj)
        known = self.agent_classes.get(kind)
        if known is None or known[0] is not kind:  # ``is``: a metaclass may lie in __eq__/__hash__
            module = sys.modules.get(getattr(kind, "__module__", None) or "")
            path = getattr(module, "__file__", None)
            known = (kind, bool(path) and self.agent_file(os.path.normpath(path)))
            self.agent_classes[kind] = known
        return known[1]

    # -- the audit hook --------------------------------------------------------------------------
    def audit(self, event, args):
        if event not in WATCHED_EVENTS or self.busy:
            return
        self.busy = True
        try:
            self._audit(event, args)
        except Exception as exc:  # the hook must never break the run it watches
            self.tamper("plugin_error", "%s: %r" % (event, exc))
        finally:
            self.busy = False

    def _audit(self, event, args):
        if event == "open" or event.startswith(("os.", "shutil.")):
            self._audit_write(event, args)
            return
        if event in ("object.__setattr__", "object.__delattr__"):
            target = args[0] if args else None
            module = getattr(target, "__module__", None) or ""
            if _is_runner_module(module) or module == self.module_name:
                self.tamper(
                    "runner_changed", "%s on %s.%s" % (event, module, args[1] if len(args) > 1 else "?")
                )
            return
        caller = sys._getframe(2)  # 0: _audit, 1: audit, 2: the code that raised the event
        if caller is None or not self.agent_file(caller.f_code.co_filename):
            return
        where = "%s:%d" % (caller.f_code.co_filename, caller.f_lineno)
        if event == "sys._getframe":
            frame = args[0] if args else None
            module = frame.f_globals.get("__name__", "") if frame is not None else ""
            if _is_runner_module(module):
                self.tamper("frame_inspection", "%s reached pytest's frame in %s" % (where, module))
            return
        if event == "sys.monitoring.register_callback" and args and args[0] is None:
            return
        self.tamper("audit_event", "%s from the agent's code at %s" % (event, where))

    def _audit_write(self, event, args):
        if event == "open":
            path, mode, flags = (list(args) + [None, None, None])[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & WRITE_FLAGS
            )
            if not writing:
                return
            paths = [path]
        else:
            paths = [a for a in args[:2]]
        for path in paths:
            if isinstance(path, bytes):
                path = os.fsdecode(path)
            if not isinstance(path, str):
                continue
            full = os.path.normpath(os.path.join(self.workdir, path))
            if full.startswith((self.out_dir, self.plugin_dir, "/proc/self/fd", "/proc/%d/fd" % os.getpid())):
                self.tamper("channel", "%s of %s" % (event, full))
            elif self._agent_on_stack() and (
                os.path.basename(full) in PROTECTED_NAMES
                or any(full == r or full.startswith(r + os.sep) for r in self.test_roots)
            ):
                self.tamper("test_files", "%s of %s by the agent's code" % (event, full))

    def _agent_on_stack(self):
        frame = sys._getframe(4)  # 0-3: this plugin's own frames
        for _ in range(64):
            if frame is None:
                return False
            if self.agent_file(frame.f_code.co_filename):
                return True
            frame = frame.f_back
        return False

    # -- checks between tests --------------------------------------------------------------------
    def check_hooks(self, config, full=True):
        hooks = config.pluginmanager.hook
        if not full and self._hot_hooks_unchanged(hooks):
            return
        for name in dir(hooks) if full else HOT_HOOKS:
            caller = getattr(hooks, name, None)
            # pluggy >= 1.1 keeps the implementations in one list: compare it in place, without the
            # copy get_hookimpls() makes (older pluggy: through get_hookimpls())
            impls = getattr(caller, "_hookimpls", _MISSING)
            if impls is _MISSING:
                get = getattr(caller, "get_hookimpls", None)
                if get is None:
                    continue
                impls = get()
            elif type(impls) is not list:  # a look-alike could show one list and call another
                self.tamper("foreign_hook", "%s's implementations are a %s" % (name, type(impls)))
                continue
            seen = self.hook_impls.get(name)
            if seen is not None and seen[0] is caller and _same(seen[1], impls):
                continue  # no id() calls on the common path: each one raises an audit event
            self.hook_impls[name] = (caller, (tuple(impls), tuple(map(_FUNCTION, impls))))
            for impl in impls:
                key = (id(impl), id(impl.function))
                if key in self.known_impls:
                    continue
                if self._allowed_impl(impl):
                    self.known_impls.add(key)
                else:
                    self.tamper(
                        "foreign_hook",
                        "%s from %s registered during the run" % (name, _where(impl.function)),
                    )
        self._remember_hot_hooks(hooks)

    def _remember_hot_hooks(self, hooks):
        """The hot hooks' callers, implementations and functions as flat tuples, for the next check."""
        try:
            callers = tuple(getattr(hooks, name) for name in HOT_HOOKS)
            lists = tuple(map(_IMPLS, callers))
        except AttributeError:  # an older pluggy: the per-hook walk every time
            self.hot_hooks = None
            return
        if not all(type(impls) is list for impls in lists):
            self.hot_hooks = None
            return
        impls = tuple(chain.from_iterable(lists))
        self.hot_hooks = (hooks, callers, impls, tuple(map(_FUNCTION, impls)))

    def _hot_hooks_unchanged(self, hooks):
        """Whether the hot hooks are as remembered: same callers, same implementation objects in the
        same order, same functions; decided in C, without an ``id()`` call."""
        seen = self.hot_hooks
        if seen is None or seen[0] is not hooks:
            return False
        try:
            callers = tuple(map(getattr, repeat(hooks), HOT_HOOKS))
            if not all(map(is_, callers, seen[1])):
                return False
            lists = tuple(map(_IMPLS, callers))
        except AttributeError:
            return False
        if not all(map(is_, map(type, lists), repeat(list))):
            return False
        impls = tuple(chain.from_iterable(lists))
        return (
            len(impls) == len(seen[2])
            and all(map(is_, impls, seen[2]))
            and all(map(is_, map(_FUNCTION, impls), seen[3]))
        )

    def _allowed_impl(self, impl):
        """Everything registered before the session starts (pytest's plugins, entry points, the initial
        conftests), and later registrations (conftests, their ``pytest_plugins``) not from the agent's
        files."""
        return not self.started or not self.agent_code(impl.function)

    def check_process(self):
        threading = sys.modules.get("threading")
        for name, hook in (
            ("sys.gettrace", sys.gettrace()),
            ("sys.getprofile", sys.getprofile()),
            ("threading trace hook", getattr(threading, "_trace_hook", None)),
            ("threading profile hook", getattr(threading, "_profile_hook", None)),
        ):
            if hook is not None and self.agent_code(hook):
                self.tamper("tracing", "%s is %s" % (name, _where(hook)))
        for name, entries, known, last in (
            ("sys.meta_path", sys.meta_path, self.meta_path, self.last_meta_path),
            ("sys.path_hooks", sys.path_hooks, self.path_hooks, self.last_path_hooks),
        ):
            if len(entries) == len(last) and all(map(is_, entries, last)):
                continue  # as at the last check: no id() calls (each raises an audit event)
            last[:] = entries
            for entry in entries:
                if id(entry) not in known and (self.agent_class(entry) or self.agent_code(entry)):
                    self.tamper("import_hook", "%s holds %r from the agent's code" % (name, entry))
        if self.builtins.__import__ is not self.import_func and self.agent_code(self.builtins.__import__):
            self.tamper("import_hook", "builtins.__import__ is %s" % _where(self.builtins.__import__))

    def check_item(self, item):
        own = vars(item)
        for name in ("runtest", "setup", "teardown", "reportinfo", "repr_failure"):
            if name in own:
                self.tamper("item_changed", "%s.%s was set on the item" % (item.nodeid, name))
        if self.agent_class(item):
            self.tamper(
                "item_changed", "%s is a %s from the agent's code" % (item.nodeid, type(item).__name__)
            )

    # -- outcomes ----------------------------------------------------------------------------------
    def record(self, item, call):
        when = getattr(call, "when", "?")
        if self.call_info_types and not isinstance(call, self.call_info_types):
            self.tamper(
                "report_changed", "%s: the %s phase's CallInfo is a %s" % (item.nodeid, when, type(call))
            )
        excinfo = getattr(call, "excinfo", None)
        outcome = "passed"
        if excinfo is not None:
            kind = getattr(excinfo, "type", None)
            names = [k.__name__ for k in getattr(kind, "__mro__", ())]
            if "XFailed" in names:
                outcome = "xfailed"
            elif "Skipped" in names or "SkipTest" in names:
                outcome = "skipped"
            else:
                outcome = "failed"
        entry = self.tests.setdefault(item.nodeid, {})
        entry[when] = outcome
        if when == "setup":
            entry["xfail_marked"] = any(True for _ in item.iter_markers(name="xfail"))

    def write(self, status):
        document = {
            "nonce": self.nonce,
            "status": status,
            "python": "%d.%d.%d" % sys.version_info[:3],
            "tests": self.tests,
            "tampered": self.findings,
        }
        data = json.dumps(document, sort_keys=True).encode("utf-8")
        os.lseek(self.fd, 0, os.SEEK_SET)
        os.ftruncate(self.fd, 0)
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]
        os.close(self.fd)
        self.fd = -1


_MISSING = object()
_CODE = attrgetter("__code__")
_FUNCTION = attrgetter("function")
_IMPLS = attrgetter("_hookimpls")


def _same(seen, impls):
    """Whether a hook's implementations (and their functions) are the very objects seen last time."""
    return (
        len(seen[0]) == len(impls)
        and all(map(is_, impls, seen[0]))
        and all(map(is_, map(_FUNCTION, impls), seen[1]))
    )


class _Part(object):
    """Snapshot entries as flat columns, so that the common case (nothing changed) is decided by
    ``map``/``is_`` in C: every name still maps to the same object in its holder (and, on a full
    check, every function still has its code). Any difference sends the caller to the per-entry walk,
    which judges it."""

    def __init__(self, entries):
        self.entries = entries
        self.regroup()

    def regroup(self):
        self.holders = tuple(entry[1] for entry in self.entries)
        self.names = tuple(entry[2] for entry in self.entries)
        self.values = tuple(entry[3] for entry in self.entries)
        self.funcs = tuple(entry[4] for entry in self.entries if entry[4] is not None)
        self.codes = tuple(entry[5] for entry in self.entries if entry[4] is not None)

    def unchanged(self, codes=True):
        """``codes=False`` skips reading ``__code__``, which raises an audit event per function; a
        code swap raises ``object.__setattr__`` anyway, which the audit hook judges as it happens."""
        try:
            if not all(map(is_, map(getitem, self.holders, self.names), self.values)):
                return False
        except KeyError:
            return False
        return not codes or all(map(is_, map(_CODE, self.funcs), self.codes))


def _code_of(value):
    """The function behind a value (a classmethod's, a property's getter), if it has code."""
    func = getattr(value, "__func__", value)
    func = getattr(func, "fget", func)
    return func if getattr(func, "__code__", None) is not None else None


def _where(func):
    code = getattr(getattr(func, "__func__", func), "__code__", None)
    if code is None:
        return repr(func)
    return "%s (%s:%d)" % (getattr(func, "__qualname__", "?"), code.co_filename, code.co_firstlineno)


def _read_and_remove(path):
    try:
        with open(path) as handle:
            text = handle.read()
    except OSError:
        return ""
    try:
        os.remove(path)
    except OSError:
        pass
    return text


def _clean_environment(module_name, plugin_dir):
    """Take ARES's variables out of os.environ: subprocesses (a pytester run) see the project's own."""
    os.environ.pop("ARES_INTEGRITY_OUT", None)
    addopts = os.environ.get("PYTEST_ADDOPTS", "").replace("-p %s" % module_name, "").strip()
    if addopts:
        os.environ["PYTEST_ADDOPTS"] = addopts
    else:
        os.environ.pop("PYTEST_ADDOPTS", None)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != plugin_dir]
    if paths:
        os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    else:
        os.environ.pop("PYTHONPATH", None)


def _arm():
    out_dir = os.environ.get("ARES_INTEGRITY_OUT")
    if not out_dir:
        return None  # a pytest the tests start themselves: nothing to watch
    _clean_environment(__name__, os.path.dirname(os.path.abspath(__file__)))
    if not hasattr(sys, "addaudithook"):
        _say("disarmed: Python %d.%d has no audit hooks" % sys.version_info[:2])
        return None
    try:
        state = Integrity(os.path.normpath(out_dir), __name__)
    except Exception as exc:
        _say("disarmed: %r" % (exc,))
        return None
    sys.addaudithook(state.audit)
    _say("armed")
    return state


def _say(text):
    os.write(1, ("ares-integrity: %s\n" % text).encode("utf-8"))


_STATE = _arm()

if _STATE is not None:
    import pytest

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(session):
        from _pytest.runner import CallInfo

        _STATE.call_info_types = (CallInfo,)
        _STATE.check_hooks(session.config)
        _STATE.started = True

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_protocol(item, nextitem):
        _STATE.checked += 1
        full = _STATE.checked % FULL_CHECK_EVERY == 0
        _STATE.check_item(item)
        _STATE.check_hooks(item.config, full)
        _STATE.check_process()
        _STATE.check_surface(full, codes=False)
        yield

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_makereport(item, call):
        _STATE.record(item, call)
        yield

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(config):
        if _STATE.fd < 0:
            return
        _STATE.check_hooks(config)
        _STATE.check_process()
        _STATE.check_surface()
        _STATE.write("complete")
