"""Host-side cleanup of what a hostile agent left behind cannot be turned against the host.

The agent is root in its sandbox and everything it makes lands in the sandbox's upper dirs on the
host, which the host later deletes. Each attack runs as the user running the tests and, dropped with
setpriv, as nobody, in a child interpreter: without privileges ARES must chmod the dirs it cannot
read, which is where a followed symlink did damage. nobody cannot reach pytest's tmp_path (under
root's 0700 dir), so these tests work in private dirs of their own in /tmp.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ares.sandbox.local import cgroups, janitor
from nobody_python import DROP, NOBODY, SKIP_REASON, can_drop, nobody_python

SRC = Path(__file__).resolve().parents[2] / "src"
SITE = sysconfig.get_paths()["purelib"]
SECRET = b"host secret\n"


# ---------------------------------------------------------------------------------------------- helpers
@pytest.fixture(params=["self", "nobody"])
def user(request: pytest.FixtureRequest) -> str:
    """Who runs the attacked code: the user running the tests (root here) or nobody."""
    if request.param == "nobody" and nobody_python() is None:
        pytest.skip(SKIP_REASON)
    return str(request.param)


@pytest.fixture
def base(user: str) -> Iterator[Path]:
    """A private scratch dir in /tmp owned by ``user``."""
    path = Path(tempfile.mkdtemp(prefix="ares-attack-"))
    if user == "nobody":
        os.chown(path, NOBODY, NOBODY)
    yield path
    janitor.remove_tree(path)


def uid_of(user: str) -> int:
    return NOBODY if user == "nobody" else os.geteuid()


def run_as(
    user: str, code: str, *args: str, env: dict[str, str] | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter as ``user`` (nobody: see nobody_python)."""
    python = [*DROP, str(nobody_python())] if user == "nobody" else [sys.executable]
    full_env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{SRC}:{SITE}", **(env or {})}
    cmd = [*python, "-c", textwrap.dedent(code), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=timeout, cwd="/")


def sandbox_env(state: Path, limits: str = "rlimit") -> dict[str, str]:
    """Under rlimit mode the upper dirs are on disk, as with a non-root host. (Root's default puts them
    on a tmpfs for the disk limit, whose unmount takes the whole tree along before removal walks it.)
    """
    return {"ARES_SANDBOX_DIR": str(state), "ARES_SANDBOX_LIMITS": limits}


def last_json(result: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def host_secret(base: Path, user: str) -> Path:
    """A host file the attacker wants chmodded: owned by ``user`` (so a followed chmod would succeed)."""
    folder = base / "host"
    folder.mkdir()
    folder.chmod(0o755)
    secret = folder / "secret"
    secret.write_bytes(SECRET)
    secret.chmod(0o600)
    for path in (folder, secret):
        os.chown(path, uid_of(user), uid_of(user))
    return secret


def snapshot(secret: Path) -> list[object]:
    """Everything a followed chmod/chown/unlink/write would change, of the file and of its dir."""
    out: list[object] = [secret.read_bytes()]
    for path in (secret, secret.parent):
        st = os.lstat(path)
        out += [st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
    return out


def dead_pid() -> int:
    """A pid that just exited (its reuse within the test is not a practical concern)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


# ------------------------------------------------------------------------- (a) symlinks the agent plants
SYMLINK_CHILD = """
import asyncio, json, os, sys
from pathlib import Path
from ares.sandbox.local import LocalSandbox

secret = sys.argv[1]
folder = os.path.dirname(secret)
AGENT = f'''set -e
cd /workspace
ln -s /proc/1/root{secret} via-proc
ln -s {secret} direct
ln -s /proc/1/root{folder} dir-via-proc
mkdir -p locked/inner readonly
ln -s {secret} locked/inner/direct
ln -s /proc/1/root{secret} locked/via-proc
ln -s {folder} locked/dir
ln -s {secret} readonly/direct
ln -s /proc/1/root{secret} readonly/via-proc
chmod 000 locked/inner locked
chmod 555 readonly
'''


def plant(where: Path) -> None:
    # What such files look like in the upper dir on disk, planted from the host side.
    (where / "host-link").symlink_to(secret)
    (where / "host-dir-link").symlink_to(folder)
    (where / "host-proc-link").symlink_to(f"/proc/1/root{secret}")
    for name, mode in (("host-locked", 0o000), ("host-readonly", 0o555)):
        os.mkdir(where / name)
        (where / name / "link").symlink_to(secret)
        (where / name / "dir-link").symlink_to(folder)
        os.chmod(where / name, mode)


async def main():
    sb = LocalSandbox()
    await sb.start()
    result = await sb.exec(AGENT)
    for where in (sb.diff_dir, sb.diff_dir / "_root", sb.diff_dir / "_root" / "workspace"):
        plant(where)
    sandbox_dir = sb.diff_dir.parent
    await sb.stop()
    print(json.dumps({"exit": result.exit_code, "stderr": result.stderr, "left": sandbox_dir.exists()}))

asyncio.run(main())
"""


@pytest.mark.parametrize("limits", ["rlimit", "auto"])
def test_stop_never_follows_symlinks_planted_by_the_agent(user: str, base: Path, limits: str) -> None:
    secret = host_secret(base, user)
    before = snapshot(secret)
    result = run_as(user, SYMLINK_CHILD, str(secret), env=sandbox_env(base / "state", limits))
    info = last_json(result)
    assert info["exit"] == 0, info["stderr"]
    assert info["left"] is False
    assert snapshot(secret) == before
    assert list((base / "state").iterdir()) == []


# ---------------------------------------------------------------------------------- (b) very deep trees
DEEP_AGENT = """
import os
os.chdir("/workspace")
for i in range(1200):
    os.mkdir("deep-level")
    os.chdir("deep-level")
    if i % 300 == 150:  # cwd stays usable: only the dirs above it are locked
        os.symlink("/proc/1/root/etc", "../etc-link")
        os.chmod("..", 0)
print("built")
"""

DEEP_CHILD = """
import asyncio, json, sys
from ares.sandbox.local import LocalSandbox

async def main():
    sb = LocalSandbox()
    await sb.start()
    built = await sb.exec("python3 -", stdin=sys.argv[1].encode(), timeout_s=120)
    sandbox_dir = sb.diff_dir.parent
    made = {"built": built.stdout.strip(), "stderr": built.stderr, "dir": str(sandbox_dir)}
    print(json.dumps(made), flush=True)
    if sys.argv[2] == "wait":  # to be SIGKILLed, leaving the tree for the sweep
        await asyncio.sleep(120)
    await sb.stop()
    left = sandbox_dir.exists()
    async with LocalSandbox() as again:
        echo = (await again.exec("echo again")).stdout.strip()
    print(json.dumps({"left": left, "again": echo}))

asyncio.run(main())
"""

START_ONE = """
import asyncio, json
from ares.sandbox.local import LocalSandbox

async def main():
    async with LocalSandbox() as sb:
        print(json.dumps({"echo": (await sb.exec("echo fresh")).stdout.strip()}))

asyncio.run(main())
"""


def gc(user: str, state: Path) -> subprocess.CompletedProcess[str]:
    code = "import sys; from ares.cli.main import app; sys.argv = ['ares', 'sandboxes', 'gc']; app()"
    env = {"ARES_SANDBOX_DIR": str(state), "DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    return run_as(user, code, env=env, timeout=120)


def test_a_1200_deep_tree_from_the_agent_does_not_break_cleanup(user: str, base: Path) -> None:
    state = base / "state"
    result = run_as(user, DEEP_CHILD, DEEP_AGENT, "stop", env=sandbox_env(state))
    assert result.returncode == 0, result.stderr[-3000:]
    made, stopped = (json.loads(line) for line in result.stdout.strip().splitlines()[-2:])
    assert made["built"] == "built", made["stderr"]
    assert stopped == {"left": False, "again": "again"}
    swept = gc(user, state)
    assert swept.returncode == 0, swept.stdout + swept.stderr
    assert list(state.iterdir()) == []


def test_gc_sweeps_a_deep_tree_a_killed_host_left(user: str, base: Path) -> None:
    state = base / "state"
    python = [*DROP, str(nobody_python())] if user == "nobody" else [sys.executable]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{SRC}:{SITE}", **sandbox_env(state)}
    cmd = [*python, "-c", textwrap.dedent(DEEP_CHILD), DEEP_AGENT, "wait"]
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, cwd="/")
    try:
        made = json.loads(child.stdout.readline())  # type: ignore[union-attr]
    finally:
        child.kill()
        child.wait(30)
        child.stdout.close()  # type: ignore[union-attr]
    assert made["built"] == "built", made["stderr"]
    sandbox_dir = Path(str(made["dir"]))
    assert sandbox_dir.is_dir()  # nobody cleaned up
    swept = gc(user, state)
    assert swept.returncode == 0, swept.stdout + swept.stderr
    assert "removed local sandbox dir" in swept.stdout
    assert not sandbox_dir.exists() and list(state.iterdir()) == []
    fresh = run_as(user, START_ONE, env=sandbox_env(state))
    assert last_json(fresh) == {"echo": "fresh"}


REMOVE_CHILD = """
import json, os, sys
from ares.sandbox.local import janitor

top, secret, depth, width = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
folder = os.path.dirname(secret)
os.mkdir(top)
wide = os.path.join(top, "wide")
os.mkdir(wide)
for i in range(width):
    os.mkdir(f"{wide}/{i}")
    os.symlink(secret, f"{wide}/{i}/link")
    with open(f"{wide}/f{i}", "w") as f:
        f.write("x")
    if i % 100 == 0:
        os.chmod(f"{wide}/{i}", 0)
# Built fd-relatively: the deepest paths are far longer than PATH_MAX.
fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
for i in range(depth):
    os.mkdir("d", dir_fd=fd)
    os.symlink(secret, "link", dir_fd=fd)
    os.symlink(folder, "dir-link", dir_fd=fd)
    if i % 500 == 250:
        os.mkfifo("fifo", dir_fd=fd)
        os.mkdir("readonly", dir_fd=fd)
        os.symlink(secret, "readonly/link", dir_fd=fd)
        os.chmod("readonly", 0o555, dir_fd=fd)
    sub = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    if i % 500 == 0:  # the top itself included
        os.fchmod(fd, 0)
    os.close(fd)
    fd = sub
os.close(fd)
failures = janitor.remove_tree(top)
print(json.dumps({"failures": failures, "left": os.path.lexists(top)}))
"""


def test_remove_tree_5000_levels_deep_and_wide(user: str, base: Path) -> None:
    secret = host_secret(base, user)
    before = snapshot(secret)
    started = time.monotonic()
    info = last_json(run_as(user, REMOVE_CHILD, str(base / "tree"), str(secret), "5000", "3000"))
    assert info == {"failures": [], "left": False}
    assert snapshot(secret) == before
    assert time.monotonic() - started < 120


def test_remove_tree_removes_a_symlink_at_the_top_as_a_link(tmp_path: Path) -> None:
    target = tmp_path / "target"
    (target / "sub").mkdir(parents=True)
    (target / "sub" / "file").write_text("keep")
    (tmp_path / "link").symlink_to(target)
    assert janitor.remove_tree(tmp_path / "link") == []
    assert not (tmp_path / "link").is_symlink() and (target / "sub" / "file").read_text() == "keep"
    assert janitor.remove_tree(tmp_path / "missing") == []


REMOVE_ONE = """
import json, sys
from ares.sandbox.local import janitor
print(json.dumps(janitor.remove_tree(sys.argv[1])))
"""


def test_a_failure_does_not_stop_the_rest_of_the_removal(user: str, base: Path) -> None:
    tree = base / "tree"
    for name in ("a", "b", "c"):
        (tree / name / "deeper").mkdir(parents=True)
        (tree / name / "deeper" / "file").write_text(name)
    stuck = tree / "b" / "stuck"
    stuck.mkdir()
    mounted = False
    try:
        if user == "nobody":  # a root-owned dir with a file in it: nobody cannot empty it
            (stuck / "file").write_text("root's")
            for path in (tree, *tree.rglob("*")):
                if path.parent != stuck and path != stuck:
                    os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
        else:  # a mount point: removal does not descend into other filesystems
            if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(stuck)]).returncode:
                pytest.skip("cannot mount a tmpfs")
            mounted = True
            (stuck / "file").write_text("on the tmpfs")
        result = run_as(user, REMOVE_ONE, str(tree))
        assert result.returncode == 0, result.stderr
        failures = json.loads(result.stdout)
        assert (stuck / "file").exists()
        remaining = sorted(str(p.relative_to(tree)) for p in tree.rglob("*"))
        assert remaining == ["b", "b/stuck", "b/stuck/file"]
        assert any("b/stuck" in f for f in failures) and len(failures) >= 2, failures
    finally:
        if mounted:
            subprocess.run(["umount", str(stuck)], check=True)


SWEEP_CHILD = """
import json, sys
from pathlib import Path
from ares.sandbox.local import janitor
print(json.dumps(janitor.sweep_stale(Path(sys.argv[1]))))
"""


def test_sweep_removes_symlinked_entries_as_links(user: str, base: Path) -> None:
    secret = host_secret(base, user)
    before = snapshot(secret)
    victim = base / "victim"
    (victim / "sub").mkdir(parents=True)
    (victim / "sub" / "file").write_text("keep")
    state = base / "state"
    state.mkdir(mode=0o700)
    pid = dead_pid()
    (state / f"{pid}-aaaa").symlink_to(victim)
    (state / f"{pid}-bbbb").symlink_to(secret)
    (state / f"{pid}-cccc" / "locked").mkdir(parents=True)
    (state / f"{pid}-cccc" / "locked" / "link").symlink_to(secret)
    (state / f"{pid}-cccc" / "locked").chmod(0)
    (state / "not-a-pid").mkdir()
    for path in (state, victim, *victim.rglob("*"), *state.iterdir(), state / f"{pid}-cccc" / "locked"):
        os.chown(path, uid_of(user), uid_of(user), follow_symlinks=False)
    result = run_as(user, SWEEP_CHILD, str(state))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []
    assert sorted(p.name for p in state.iterdir()) == ["not-a-pid"]
    assert (victim / "sub" / "file").read_text() == "keep"
    assert snapshot(secret) == before


# -------------------------------------------------------------------------------------- (c) the state dir
STATE_CHILD = """
import os, stat
from ares.errors import SandboxError
from ares.sandbox.local import janitor
try:
    root = janitor.state_root()
except SandboxError as exc:
    print("ERR", exc)
else:
    st = os.lstat(root)
    print("OK", root, oct(stat.S_IMODE(st.st_mode)), st.st_uid)
"""


def prepare_state(case: str, path: Path, user: str) -> None:
    owner = uid_of(user)
    if case == "other-owner":
        path.mkdir(mode=0o700)
        other = 0 if user == "nobody" else NOBODY
        os.chown(path, other, other)
    elif case == "symlink":
        real = path.parent / "real"
        real.mkdir(mode=0o700)
        os.chown(real, owner, owner)
        path.symlink_to(real)
    elif case in ("group-writable", "world-writable", "private", "readable"):
        path.mkdir()
        path.chmod(
            {"group-writable": 0o770, "world-writable": 0o777, "private": 0o700, "readable": 0o755}[case]
        )
        os.chown(path, owner, owner)
    elif case == "file":
        path.write_text("")
        os.chown(path, owner, owner)
    else:
        assert case == "fresh"


REFUSED = {
    "other-owner": "is owned by uid",
    "symlink": "it is a symlink",
    "group-writable": "writable by its group or by others",
    "world-writable": "writable by its group or by others",
    "file": "it is not a directory",
}


@pytest.mark.parametrize("case", [*REFUSED, "fresh", "private", "readable"])
@pytest.mark.parametrize("where", ["override", "default"])
def test_state_dir_must_be_ours(user: str, base: Path, case: str, where: str) -> None:
    if where == "override":
        path, env = base / "state", {"ARES_SANDBOX_DIR": str(base / "state")}
    else:  # $TMPDIR/ares-<uid>, as another local user could pre-create it in a shared /tmp
        path, env = base / f"ares-{uid_of(user)}", {"TMPDIR": str(base)}
    prepare_state(case, path, user)
    out = run_as(user, STATE_CHILD, env=env)
    assert out.returncode == 0, out.stderr
    if case in REFUSED:
        assert out.stdout.startswith(f"ERR refusing to use {path} as the sandbox state dir")
        assert REFUSED[case] in out.stdout and "ARES_SANDBOX_DIR" in out.stdout
        if case == "symlink":
            assert list((base / "real").iterdir()) == []
    else:
        mode = {"fresh": "0o700", "private": "0o700", "readable": "0o755"}[case]
        assert out.stdout.split() == ["OK", str(path), mode, str(uid_of(user))]


def test_gc_reports_a_hijacked_state_dir(user: str, base: Path) -> None:
    prepare_state("symlink", base / "state", user)
    result = gc(user, base / "state")
    assert result.returncode == 2
    said = result.stdout + result.stderr  # CLI errors go to stderr, one line
    assert "refusing to use" in said and "it is a symlink" in said


# ---------------------------------------------------------------------------------------- (d) cgroups
def writable_hierarchy() -> cgroups.Hierarchy:
    hierarchy = cgroups.available()["pids"]
    if not isinstance(hierarchy, cgroups.Hierarchy) or not os.access(hierarchy.own, os.W_OK):
        pytest.skip(f"no writable pids cgroup here: {hierarchy}")
    return hierarchy


async def test_sandbox_cgroups_live_in_their_own_parent() -> None:
    from ares.sandbox import Resources, SandboxSpec
    from ares.sandbox.local import LocalSandbox

    hierarchy = writable_hierarchy()
    async with LocalSandbox(SandboxSpec(resources=Resources(pids=64))) as sb:
        if sb.limits.pids is None or sb.limits.pids.mechanism not in ("cgroup-v1", "cgroup-v2"):
            pytest.skip(f"pids are not limited by a cgroup: {sb.limits}")
        # Where pid 1 really is (a pre-launched init's cgroups are named when it is launched).
        lines = Path(f"/proc/{sb.host_pid}/cgroup").read_text().splitlines()
        want = "pids" if hierarchy.version == 1 else ""  # v2: the unified line, "0::/path"
        held = next(p for _, c, p in (line.split(":", 2) for line in lines) if want in c.split(","))
        path = hierarchy.mount / held.lstrip("/")
        name = path.name
        assert path.parent == hierarchy.own / cgroups.PARENT and cgroups.NAME.fullmatch(name)
        assert name.startswith(f"ares-{os.getpid()}-")
        assert path.is_dir() and not (hierarchy.own / name).exists()
        assert (await sb.exec("echo in")).stdout == "in\n"
    assert not path.exists()
    # The parent goes with the last sandbox in it (other processes' sandboxes may still be there).
    assert not path.parent.exists() or any(p.is_dir() for p in path.parent.iterdir())


def test_stale_cgroup_sweep_stays_inside_its_parent(user: str) -> None:
    if not can_drop():
        pytest.skip("needs root to make decoy cgroups")
    hierarchy = writable_hierarchy()
    dead = dead_pid()
    # Our own sweep runs here, in our cgroup; nobody's in a cgroup of its own (``home``), so that a root
    # ARES process beside this one (CI's other lane), whose sweep rightly clears dead owners' cgroups
    # in our shared parent, cannot take the decoy that nobody must leave alone.
    home = hierarchy.own if user != "nobody" else hierarchy.own / f"ares-test-home-{secrets.token_hex(4)}"
    parent = home / cgroups.PARENT
    made_parent = not parent.exists()
    other = hierarchy.mount / f"ares-test-{secrets.token_hex(4)}"  # e.g. another container's subtree
    outside = [hierarchy.mount / f"ares-{dead}-abc123", other / f"ares-{dead}-abc124"]
    inside_dead, inside_live = parent / f"ares-{dead}-def456", parent / f"ares-{os.getpid()}-def457"
    created: list[Path] = []
    sleepers: dict[Path, subprocess.Popen[bytes]] = {}
    try:
        for path in (home, parent, other, *outside, inside_dead, inside_live):
            if not path.exists():
                path.mkdir()
                created.append(path)
        for path in (*outside, inside_dead):
            sleepers[path] = subprocess.Popen(["sleep", "600"])
            (path / "cgroup.procs").write_text(str(sleepers[path].pid))
        if user == "nobody":
            code = "from ares.sandbox.local import cgroups; cgroups.sweep_stale(); print('swept')"
            enter = f'echo $$ > {home}/cgroup.procs && exec "$@"'
            swept = subprocess.run(
                ["sh", "-c", enter, "sh", *DROP, str(nobody_python()), "-c", code],
                capture_output=True, text=True, timeout=180, cwd="/",
                env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{SRC}:{SITE}"},
            )  # fmt: skip
            assert swept.stdout == "swept\n", swept.stderr
        else:
            cgroups.sweep_stale()
        for path in outside:
            assert path.is_dir() and sleepers[path].poll() is None, path
            assert (path / "cgroup.procs").read_text().split() == [str(sleepers[path].pid)]
        assert inside_live.is_dir()
        if user == "nobody":  # it may not touch root's cgroups at all
            assert inside_dead.is_dir() and sleepers[inside_dead].poll() is None
        else:
            assert not inside_dead.exists()
            assert sleepers[inside_dead].wait(10) == -signal.SIGKILL
    finally:
        for proc in sleepers.values():
            proc.kill()
            proc.wait(10)
        for path in reversed(created):
            if path in sleepers or path == inside_live:
                cgroups.remove_cgroup(path)
            elif path != parent or made_parent:  # our parent dir goes if no sandbox is using it
                with contextlib.suppress(OSError):
                    path.rmdir()
