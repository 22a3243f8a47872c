"""A multi-stage Dockerfile ``FROM`` a real image on a loopback registry (Debian bookworm pushed from
podman's storage): pulled, built with the fallback off, run as root and as an unprivileged host user."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from oci_registry_kit import Registry

from ares.images.cache import ImageCache
from ares.sandbox.local.images import image_sandbox, local_builder
from nobody_python import DROP, NOBODY, SKIP_REASON, nobody_python


def dockerfile(image: str) -> str:
    return f"""FROM {image} AS build
RUN mkdir -p /out && echo compiled > /out/artifact && cat /etc/debian_version > /out/version
FROM {image}
COPY --from=build /out/ /usr/local/share/app/
ENV GREETING=hello
WORKDIR /srv
RUN useradd --create-home agent && echo "$GREETING" > /srv/greeting
"""


@pytest.fixture
def pushed(registry: Registry, debian_image: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("ARES_INSECURE_REGISTRIES", registry.host)
    return debian_image


async def test_multi_stage_build_from_a_pulled_image_runs_as_root(pushed: str, tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(dockerfile(pushed))
    builder = local_builder(ImageCache(tmp_path / "cache"), fallback="off")
    image = await builder.build(ctx, tags=("app:1",))
    assert image.base.startswith(f"{pushed}@sha256:") and image.substitutions == ()
    assert image.config.workdir == "/srv" and image.config.env["GREETING"] == "hello"
    async with image_sandbox(image) as sandbox:
        assert (await sandbox.read_file("/usr/local/share/app/artifact")) == b"compiled\n"
        assert (await sandbox.exec("cat greeting && id -u agent")).stdout == "hello\n1000\n"
        assert b"bookworm" in await sandbox.read_file("/etc/os-release")
    # Loaded again from its record (the pulled base comes from the store, not the registry).
    again = await local_builder(ImageCache(tmp_path / "cache"), fallback="off").from_name("app:1")
    assert again.key == image.key and again.base == image.base


CHILD = """
import asyncio, json, sys
from pathlib import Path
from ares.images.cache import ImageCache
from ares.sandbox.local.images import image_sandbox, local_builder

async def main():
    image = await local_builder(ImageCache(Path(sys.argv[2])), fallback="off").build(Path(sys.argv[1]))
    async with image_sandbox(image) as sandbox:
        out = (await sandbox.exec("cat /usr/local/share/app/artifact greeting; id -u")).stdout
    print(json.dumps({"base": image.base, "out": out}))

asyncio.run(main())
"""


async def test_the_same_build_as_an_unprivileged_user(pushed: str, request: pytest.FixtureRequest) -> None:
    python = nobody_python()
    if python is None:
        pytest.skip(SKIP_REASON)
    work = Path(tempfile.mkdtemp(prefix="ares-nobody-build-"))  # pytest's tmp dirs are root-only
    request.addfinalizer(lambda: shutil.rmtree(work, ignore_errors=True))
    os.chmod(work, 0o755)
    (work / "ctx").mkdir()
    (work / "ctx" / "Dockerfile").write_text(dockerfile(pushed))
    for path in (work, work / "ctx", work / "ctx" / "Dockerfile"):
        os.chown(path, NOBODY, NOBODY)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        "HOME": str(work),
        "PYTHONPATH": os.pathsep.join(
            p for p in sys.path if p.endswith("site-packages") or p.endswith("src")
        ),
        "ARES_INSECURE_REGISTRIES": os.environ["ARES_INSECURE_REGISTRIES"],
        "XDG_RUNTIME_DIR": str(work),
    }
    command = [*DROP, python, "-c", CHILD, str(work / "ctx"), str(work / "cache")]
    done = await asyncio.to_thread(
        subprocess.run, command, capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["base"].startswith(f"{pushed}@sha256:")
    assert result["out"] == "compiled\nhello\n0\n"
