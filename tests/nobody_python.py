"""An interpreter that uid 65534 ("nobody") can run, of the running Python's version.

Tests that run ARES as an unprivileged host drop to nobody with setpriv and start a child interpreter
on this venv's site-packages (``PYTHONPATH``). That child must be of the running Python's minor
version: the site-packages hold extension modules built for it. The venv's own interpreter usually
cannot be used as it is: pyenv's Pythons live below root's 0700 home, where nobody may exec the binary
but not load its libpython or read its standard library. Candidates, in order:

1. the running interpreter, in case nobody can run it;
2. a private copy of it in a 0755 temp dir: its binary, its libpython and its standard library (hard
   links where possible), the binary's RUNPATH pointed at the copy's own lib dir. Made once per
   process, removed at exit;
3. the system ``python3`` (Debian's /usr/bin/python3).

Each is tried as nobody: the first that is exactly the running build (``sys.version``) wins, else the
first of the running minor version (its extension modules load). ``None`` when none works (or the suite
is not root, or setpriv is missing): tests skip then, with ``SKIP_REASON``.
"""

from __future__ import annotations

import ast
import atexit
import functools
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

NOBODY = 65534
DROP = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
SKIP_REASON = (
    f"needs root (to drop to nobody), setpriv, and a Python {sys.version_info[0]}.{sys.version_info[1]} "
    "that uid 65534 can run"
)
#: Parts of the standard library no test child imports (large, or needing a display).
_STDLIB_SKIP = {"site-packages", "dist-packages", "test", "idlelib", "tkinter", "turtledemo", "ensurepip"}
#: The copy's binary finds its libpython here, relative to itself.
_ORIGIN_LIB = b"$ORIGIN/../lib"


def can_drop() -> bool:
    """Root with setpriv: tests may drop to nobody (cheap; the interpreter is found by ``nobody_python``)."""
    return os.geteuid() == 0 and shutil.which("setpriv") is not None


@functools.cache
def nobody_python() -> str | None:
    """Path of an interpreter nobody can run, of the running Python's version (see the module doc)."""
    if not can_drop():
        return None
    same_minor = None
    for candidate in _candidates():
        seen = _identity_as_nobody(candidate)
        if seen is None or seen[1:] != _identity()[1:]:
            continue
        if seen[0] == sys.version:
            return candidate
        same_minor = same_minor or candidate
    return same_minor


def _candidates() -> Iterator[str]:
    yield sys.executable
    if (copy := _private_copy()) is not None:
        yield copy
    system = ("/usr/bin/python3", shutil.which("python3", path="/usr/bin:/bin"))
    yield from dict.fromkeys(p for p in system if p)


_IDENTITY = (
    "import sys; print(repr((sys.version, sys.implementation.name, sys.version_info[:2], sys.abiflags)))"
)


def _identity() -> tuple[object, ...]:
    return (sys.version, sys.implementation.name, sys.version_info[:2], sys.abiflags)


def _identity_as_nobody(python: str) -> tuple[object, ...] | None:
    """What ``python`` says it is when nobody starts it (None: it does not start)."""
    if not Path(python).exists():
        return None
    try:
        proc = subprocess.run(
            [*DROP, python, "-c", _IDENTITY],
            capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}, cwd="/", timeout=60, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    try:
        seen = ast.literal_eval(proc.stdout.strip())
    except (ValueError, SyntaxError):
        return None
    return seen if isinstance(seen, tuple) else None


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _private_copy() -> str | None:
    """A nobody-readable copy of the running interpreter (binary, libpython, stdlib), or None."""
    exe = Path(os.path.realpath(sys.executable))
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    if not exe.is_file() or stdlib.name != version or not (stdlib / "os.py").is_file():
        return None
    dest = Path(tempfile.mkdtemp(prefix="ares-nobody-python-"))
    atexit.register(shutil.rmtree, dest, True)
    dest.chmod(0o755)
    (dest / "bin").mkdir(mode=0o755)
    (dest / "lib").mkdir(mode=0o755)
    shutil.copytree(
        stdlib,
        dest / "lib" / version,
        ignore=lambda folder, names: [n for n in names if n in _STDLIB_SKIP] if folder == str(stdlib) else [],
        copy_function=_link_or_copy,
    )
    binary = exe.read_bytes()
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        libdir = str(sysconfig.get_config_var("LIBDIR") or "")
        soname = str(sysconfig.get_config_var("INSTSONAME") or "")
        if not libdir or not soname or not Path(libdir, soname).is_file():
            return None
        _link_or_copy(os.path.join(libdir, soname), str(dest / "lib" / soname))
        # The binary's RUNPATH names the original lib dir (below a dir nobody cannot traverse). Point it
        # at the copy's (the loader reads the string up to its NUL; the rest becomes padding).
        old = libdir.encode() + b"\0"
        if binary.count(old) == 1 and len(old) > len(_ORIGIN_LIB):
            binary = binary.replace(old, _ORIGIN_LIB.ljust(len(old), b"\0"))
    target = dest / "bin" / version
    target.write_bytes(binary)
    target.chmod(0o755)
    return str(target)


def run_as_nobody(
    request: Any, prefix: str, code: str, paths: Sequence[Path | str], timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` (``python -c``) as nobody in a fresh home it owns (removed after the test), with
    ``paths`` and this venv's site-packages on ``PYTHONPATH``, registries offline. Skips where no
    interpreter serves."""
    import pytest

    python = nobody_python() or pytest.skip(SKIP_REASON)
    home = Path(tempfile.mkdtemp(prefix=prefix))  # pytest's tmp dirs are root's (0700)
    request.addfinalizer(lambda: shutil.rmtree(home, ignore_errors=True))
    os.chown(home, NOBODY, NOBODY)
    env = {
        "PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(home), "ARES_IMAGE_FALLBACK": "offline",
        "PYTHONPATH": os.pathsep.join([*map(str, paths), sysconfig.get_paths()["purelib"]]),
    }  # fmt: skip
    return subprocess.run(
        [*DROP, python, "-c", code], env=env, cwd=home, capture_output=True, text=True, timeout=timeout
    )
