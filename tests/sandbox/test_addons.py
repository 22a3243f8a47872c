"""Add-on layers (an installed agent over a task image): filled once into the host cache, shown
read-only in every sandbox of every backend, and out of the agent's reach: nothing it does inside
changes the cached files, another sandbox's view, or what the verifier grades."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sysconfig
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ares.errors import SandboxError
from ares.sandbox.addon_cache import COMPLETE, addons_dir, content_dir, ensure_addon
from ares.sandbox.addons import AddonLayer
from ares.sandbox.base import Resources, SandboxSpec
from ares.sandbox.local import LocalSandbox
from nobody_python import SKIP_REASON, can_drop, nobody_python

SRC = Path(__file__).parents[2] / "src"
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@dataclass(frozen=True)
class ToolSource:
    """Writes a small 'agent': an executable script and a data file; counts its fills in ``log``."""

    log: Path
    fail: bool = False
    files: tuple[tuple[str, str], ...] = field(default=(("bin/tool", "#!/bin/sh\necho tool-ran\n"),))

    async def populate(self, dest: Path) -> None:
        with self.log.open("a") as out:
            out.write("fill\n")
        if self.fail:
            (dest / "half").write_text("partial")
            raise RuntimeError("the registry went away")
        for rel, text in self.files:
            path = dest / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            path.chmod(0o700)  # the cache opens it up: a sandbox's root is not the host's owner
        (dest / "data.txt").write_text("pristine\n")


def _addon(tmp_path: Path, key: str = "tool-1.0", **kw: object) -> AddonLayer:
    return AddonLayer(
        key=key, mount="/opt/ares/agents/tool-1.0", source=ToolSource(tmp_path / f"{key}.log", **kw)
    )


def _fills(tmp_path: Path, key: str = "tool-1.0") -> int:
    log = tmp_path / f"{key}.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_an_addon_key_and_mount_are_checked() -> None:
    source = ToolSource(Path("/nonexistent"))
    for mount in ("relative/dir", "/", "/opt/../etc"):
        with pytest.raises(ValueError, match="absolute dir"):
            AddonLayer(key="k", mount=mount, source=source)
    for key in ("", "a/b", ".hidden"):
        with pytest.raises(ValueError, match="plain file name"):
            AddonLayer(key=key, mount="/opt/x", source=source)


async def test_a_layer_is_filled_once_even_when_asked_concurrently(tmp_path: Path) -> None:
    addon = _addon(tmp_path)
    dirs = await asyncio.gather(*(ensure_addon(addon, tmp_path / "cache") for _ in range(4)))
    assert len(set(dirs)) == 1 and _fills(tmp_path) == 1
    assert (dirs[0] / COMPLETE).is_file()
    tool = content_dir(dirs[0], addon) / "bin" / "tool"
    assert oct(tool.stat().st_mode & 0o777) == "0o755"  # readable and runnable by a sandbox's ids
    await ensure_addon(addon, tmp_path / "cache")
    assert _fills(tmp_path) == 1


async def test_a_failed_fill_leaves_nothing_and_the_next_ask_fills_again(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(RuntimeError, match="registry went away"):
        await ensure_addon(_addon(tmp_path, fail=True), cache)
    assert sorted(p.name for p in addons_dir(cache).iterdir()) == ["tool-1.0.lock"]  # no half layer
    layer = await ensure_addon(_addon(tmp_path), cache)
    assert (content_dir(layer, _addon(tmp_path)) / "data.txt").read_text() == "pristine\n"
    assert _fills(tmp_path) == 2


async def test_the_local_sandbox_shows_the_addon_and_the_agent_cannot_change_it(tmp_path: Path) -> None:
    addon = _addon(tmp_path)
    spec = SandboxSpec(addons=(addon,))
    attack = (
        "/opt/ares/agents/tool-1.0/bin/tool && echo forged > /opt/ares/agents/tool-1.0/data.txt && "
        "rm -rf /opt/ares/agents/tool-1.0/bin && cat /opt/ares/agents/tool-1.0/data.txt; "
        "ls /opt/ares/agents/tool-1.0"
    )
    first = LocalSandbox(spec)
    await first.start()
    try:
        seen = await first.exec(attack)
    finally:
        await first.stop()
    assert seen.stdout.split() == ["tool-ran", "forged", "data.txt"]  # the sandbox's own upper dir only
    cached = content_dir(await ensure_addon(addon), addon)
    assert (cached / "data.txt").read_text() == "pristine\n" and (cached / "bin" / "tool").is_file()
    second = LocalSandbox(spec)
    await second.start()
    try:
        again = await second.exec(
            "cat /opt/ares/agents/tool-1.0/data.txt; /opt/ares/agents/tool-1.0/bin/tool"
        )
    finally:
        await second.stop()
    assert again.stdout.split() == ["pristine", "tool-ran"]
    assert _fills(tmp_path) == 1


async def test_an_addon_under_a_separate_mount_of_the_image_is_refused(tmp_path: Path) -> None:
    addon = AddonLayer(key="in-usr", mount="/usr/local/tool", source=ToolSource(tmp_path / "usr.log"))
    sandbox = LocalSandbox(SandboxSpec(addons=(addon,)))  # the host base keeps /usr in its own mount
    with pytest.raises(SandboxError, match="mounts at /usr/local/tool"):
        await sandbox.start()
    await sandbox.stop()


DRIVER = """
import asyncio, json, sys
from dataclasses import dataclass
from pathlib import Path
from ares.sandbox.addons import AddonLayer
from ares.sandbox.base import Resources, SandboxSpec
from ares.sandbox.local import LocalSandbox

@dataclass(frozen=True)
class Source:
    async def populate(self, dest):
        (dest / "bin").mkdir()
        (dest / "bin" / "tool").write_text("#!/bin/sh\\necho tool-ran-as-$(id -u)\\n")
        (dest / "bin" / "tool").chmod(0o700)

async def main():
    addon = AddonLayer(key="tool-nobody", mount="/opt/ares/agents/tool", source=Source())
    box = LocalSandbox(SandboxSpec(addons=(addon,)))
    await box.start()
    try:
        ran = await box.exec("cd /opt/ares/agents/tool && bin/tool; echo x > bin/tool; echo rc=$?")
    finally:
        await box.stop()
    print(json.dumps(ran.stdout.split()))

asyncio.run(main())
"""


@pytest.mark.skipif(not can_drop(), reason=SKIP_REASON)
def test_an_unprivileged_host_user_fills_its_own_cache_and_runs_the_addon(
    request: pytest.FixtureRequest,
) -> None:
    python = nobody_python() or pytest.skip(SKIP_REASON)
    home = Path(tempfile.mkdtemp(prefix="ares-nobody-addon-"))
    request.addfinalizer(lambda: shutil.rmtree(home, ignore_errors=True))
    os.chown(home, 65534, 65534)
    env = {
        "PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(home),
        "ARES_CACHE_DIR": str(home / "cache"),
        "PYTHONPATH": os.pathsep.join([str(SRC), sysconfig.get_paths()["purelib"]]),
    }  # fmt: skip
    ran = subprocess.run(
        [*NOBODY, python, "-c", DRIVER], env=env, cwd=home, capture_output=True, text=True, timeout=300
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert json.loads(ran.stdout.strip().splitlines()[-1]) == ["tool-ran-as-0", "rc=0"]
    layer = home / "cache" / "addons" / "tool-nobody"
    assert layer.stat().st_uid == 65534
    assert (layer / "_root/opt/ares/agents/tool/bin/tool").read_text().startswith("#!/bin/sh")  # untouched


async def test_rlimit_memory_makes_room_for_the_addons_mapped_program(tmp_path: Path) -> None:
    """RLIMIT_AS counts mapped files: an agent's 300 MB binary must not eat a 512 MB task's memory,
    so the cap grows by the add-on's largest program, and the limits report says so."""

    @dataclass(frozen=True)
    class BigProgram:
        async def populate(self, dest: Path) -> None:
            big = dest / "bin" / "big"
            big.parent.mkdir()
            with big.open("wb") as out:
                out.truncate(200 * (1 << 20) + 1)  # sparse: 200 MiB and a byte, nothing on disk
            big.chmod(0o755)

    addon = AddonLayer(key="big-1", mount="/opt/ares/agents/big", source=BigProgram())
    spec = SandboxSpec(resources=Resources(memory_mb=256), addons=(addon,))
    box = LocalSandbox(spec, limit_mode="rlimit")
    await box.start()
    try:
        seen = await box.exec("grep 'Max address space' /proc/self/limits")
        report = str(box.limits)
    finally:
        await box.stop()
    assert seen.stdout.split()[3] == str(457 * (1 << 20))  # 256 + 201 MiB
    assert (
        "RLIMIT_AS caps each process's virtual memory at 457 MiB (256 + 201 for an add-on's mapped binary)"
        in report
    )
