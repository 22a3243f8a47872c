"""Harness of the hostile-agent suite: every scenario runs once as root and once as an unprivileged user.

A scenario is a small Python program (``async def scenario(args) -> dict``) run in a child
interpreter, which plays the host: it starts a ``LocalSandbox``, runs probes in it and prints one
JSON object, on which the tests assert. As "root" the child runs directly (ARES run by root, as in
CI); as "nobody" it drops to uid/gid 65534 with ``setpriv`` first (ARES run by an ordinary user).

Helpers available to a scenario (see ``PRELUDE``): ``run(sb, cmd, ...)`` is ``sb.exec`` that turns
an exception or a hang into ``{"raised": ...}``, ``probe(sb, script)`` runs a ``python3 -c`` script
in the sandbox whose last stdout line is JSON, ``host_processes()`` lists the host's processes
below the scenario, ``Resources``/``SandboxSpec``/``LocalSandbox``.

Set ``ARES_SECURITY_DUMP=<dir>`` to keep every scenario's raw result as JSON when a case fails.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ares.sandbox.local import janitor
from nobody_python import SKIP_REASON, nobody_python

SRC = Path(__file__).resolve().parents[2] / "src"
CHECKOUT = SRC.parent
NOBODY = 65534
WHO = ("root", "nobody")
RESULT_TAG = "ARES-SEC-RESULT "
SECRET_ENV = "ARES_TEST_SECRET"
#: Set to a directory to keep every scenario's raw result there as JSON.
DUMP_ENV = "ARES_SECURITY_DUMP"

PRELUDE = '''
import asyncio, json, os, shlex, socket, sys, time
from pathlib import Path
from ares.sandbox.base import Resources, SandboxSpec
from ares.sandbox.local import LocalSandbox

ARGS = json.loads(sys.argv[1])


def as_dict(r):
    return {
        "stdout": r.stdout[-20000:], "stderr": r.stderr[-4000:], "stdout_len": len(r.stdout),
        "exit_code": r.exit_code, "timed_out": r.timed_out, "limit_hit": r.limit_hit,
        "duration_s": r.duration_s,
    }


async def run(sb, cmd, timeout_s=30.0, guard_s=None, **kw):
    """sb.exec; an exception or a hang (guard_s) becomes {"raised": ...} and the scenario goes on."""
    try:
        r = await asyncio.wait_for(sb.exec(cmd, timeout_s=timeout_s, **kw), guard_s or timeout_s + 15)
    except BaseException as exc:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return {"raised": f"{type(exc).__name__}: {exc}"[:2000]}
    return as_dict(r)


async def probe(sb, script, timeout_s=60.0, argv=None, **kw):
    """Run a python3 probe in the sandbox (``argv``: its sys.argv[1], as JSON):
    {"exec": result, "data": its last stdout line as JSON or None}."""
    cmd = "python3 -c " + shlex.quote(script)
    if argv is not None:
        cmd += " " + shlex.quote(json.dumps(argv))
    r = await run(sb, cmd, timeout_s, **kw)
    data = None
    lines = r.get("stdout", "").strip().splitlines()
    if lines:
        try:
            data = json.loads(lines[-1])
        except ValueError:
            pass
    return {"exec": r, "data": data}


def host_processes():
    """The host's view of every process below this one: pid, ppid, cmdline, Uid/Gid/NSpid lines."""
    procs = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        procs[int(entry)] = {
            "pid": int(entry),
            "ppid": int(fields.get("PPid", "0").strip()),
            "cmdline": cmdline.replace(b"\\0", b" ").decode(errors="replace").strip(),
            "uid": [int(x) for x in fields.get("Uid", "").split()],
            "gid": [int(x) for x in fields.get("Gid", "").split()],
            "nspid": [int(x) for x in fields.get("NSpid", "").split()],
        }
    below, frontier = [], {os.getpid()}
    while frontier:
        frontier = {p for p, info in procs.items() if info["ppid"] in frontier}
        below.extend(procs[p] for p in frontier)
    return below
'''

EPILOGUE = """
print("{tag}" + json.dumps(asyncio.run(scenario(ARGS))), flush=True)
"""


@dataclass(frozen=True)
class Host:
    """What one mode's scenarios share on the host: dirs the scenario user may use, and a planted secret."""

    who: str
    base: Path  # 0755, owned by the scenario user; everything below is the scenario's
    state: Path  # ARES_SANDBOX_DIR (created by ARES itself, so its modes are ARES's choice)
    marker: Path  # a host-only file (world-readable, so only isolation keeps it from the sandbox)
    marker_text: str
    secret: str  # the value of $ARES_TEST_SECRET in the scenario's (host) environment
    uid: int

    def scratch(self, name: str) -> Path:
        """A fresh dir below ``base`` that the scenario user owns."""
        path = self.base / f"{name}-{secrets.token_hex(3)}"
        path.mkdir(mode=0o755)
        os.chown(path, self.uid, self.uid)
        return path


Scenario = Callable[..., dict[str, Any]]


def _python_for(who: str) -> str | None:
    """An interpreter the scenario user can run, of the running version (the venv's site-packages hold
    extension modules built for it): the running one, or for nobody what ``nobody_python`` finds."""
    if who == "root" or os.geteuid() != 0:
        return sys.executable
    return nobody_python()


@pytest.fixture(scope="module", params=WHO)
def who(request: pytest.FixtureRequest) -> str:
    """Who runs ARES: "root", or "nobody" (uid 65534; the current user when the suite is not root)."""
    mode: str = request.param
    if mode == "root" and os.geteuid() != 0:
        pytest.skip("ARES as root needs the suite to run as root")
    if mode == "nobody" and os.geteuid() == 0 and not shutil.which("setpriv"):
        pytest.skip("dropping to nobody needs setpriv (util-linux)")
    if _python_for(mode) is None:
        pytest.skip(SKIP_REASON)
    return mode


@pytest.fixture(scope="module")
def host(who: str) -> Iterator[Host]:
    uid = NOBODY if who == "nobody" and os.geteuid() == 0 else os.geteuid()
    base = Path(tempfile.mkdtemp(prefix="ares-sec-"))
    base.chmod(0o755)
    os.chown(base, uid, uid)
    marker_text = f"host-only-{secrets.token_hex(16)}"
    marker = base / f"host-secret-{secrets.token_hex(4)}.txt"
    marker.write_text(marker_text)
    marker.chmod(0o644)
    home = base / "home"
    home.mkdir(mode=0o700)
    os.chown(home, uid, uid)
    yield Host(who, base, base / "state", marker, marker_text, f"s3cr3t-{secrets.token_hex(16)}", uid)
    janitor.remove_tree(base)


@pytest.fixture(scope="module")
def scenario(request: pytest.FixtureRequest, who: str, host: Host) -> Scenario:
    """``scenario(body, args=None, timeout=...)``: run ``body`` (defining ``async def scenario(args)``)
    as ``who`` and return the dict it produced. ``args`` gets ``host`` paths added."""
    python = _python_for(who)
    assert python is not None

    def run(body: str, args: dict[str, Any] | None = None, timeout: float = 110.0) -> dict[str, Any]:
        program = PRELUDE + textwrap.dedent(body) + EPILOGUE.format(tag=RESULT_TAG)
        full_args = {
            "who": who,
            "base": str(host.base),
            "state": str(host.state),
            "marker": str(host.marker),
            "checkout": str(CHECKOUT),
            **(args or {}),
        }
        env = {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": str(host.base / "home"),
            "LANG": "C.UTF-8",
            "ARES_SANDBOX_DIR": str(host.state),
            "PYTHONPATH": f"{SRC}:{sysconfig.get_paths()['purelib']}",
            SECRET_ENV: host.secret,
        }
        cmd = [python, "-c", program, json.dumps(full_args), f"ares-sec-host-{host.base.name}"]
        if who == "nobody" and os.geteuid() == 0:
            cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *cmd]
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=env, cwd=host.base, timeout=timeout, check=False
        )
        for line in reversed(proc.stdout.splitlines()):
            if line.startswith(RESULT_TAG):
                result: dict[str, Any] = json.loads(line[len(RESULT_TAG) :])
                if dump := os.environ.get(DUMP_ENV):  # raw results, for debugging a failing case
                    name = f"{request.module.__name__.rsplit('.', 1)[-1]}-{who}-{secrets.token_hex(2)}.json"
                    Path(dump, name).write_text(json.dumps(result, indent=1))
                return result
        pytest.fail(f"the scenario ({who}) printed no result; exit {proc.returncode}:\n{proc.stderr[-4000:]}")

    return run
