"""A Harbor task that names a prebuilt image and ships no Dockerfile, run as a user would with `ares run`.

The image (Debian bookworm with python3, from podman's storage) is pushed to a registry on loopback.
The embedded sandbox pulls it without a daemon, as root and as an unprivileged user; the docker
backend runs the same task dir from the engine's copy. Oracle scores 1 and null 0 everywhere, and
the episode record names the image that really ran (its manifest digest, where it came from).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from oci_registry_kit import Registry

from nobody_python import SKIP_REASON, can_drop, nobody_python

SRC = Path(__file__).resolve().parents[2] / "src"
FIX_BUG = Path(__file__).resolve().parents[1] / "fixtures" / "harbor" / "fix-bug"
DEBIAN = "localhost/ares-debian:bookworm"
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.fixture(scope="module")
def app_image_ref(
    debian_image: str, registry: Registry, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """Debian with WORKDIR /app, an ENV and a LABEL in its config, built by podman and pushed."""
    context = tmp_path_factory.mktemp("app-image")
    (context / "Containerfile").write_text(
        f"FROM {DEBIAN}\nWORKDIR /app\nENV ARES_IMAGE_MARK=from-the-image\nLABEL org.example.kind=task\n"
    )
    local = f"localhost/ares-test-app:{secrets.token_hex(6)}"  # suites running side by side share podman
    subprocess.run(["podman", "build", "-q", "--isolation=chroot", "-t", local, str(context)], check=True)
    ref = f"{registry.host}/ares/debian-app:1"
    push = ["podman", "push", "--quiet", "--tls-verify=false", local, f"docker://{ref}"]
    try:
        subprocess.run(push, check=True, timeout=300)
        yield ref
    finally:
        subprocess.run(["podman", "untag", ref, ref], capture_output=True, check=False)
        subprocess.run(["podman", "rmi", local], capture_output=True, check=False)


def task_dir(root: Path, image: str, *, workdir: bool = True) -> Path:
    """fix-bug with `docker_image` set in its [environment] (it has no Dockerfile); without its
    `workdir` line the task runs in the image's own working dir."""
    task = root / "fix-bug-image"
    shutil.copytree(FIX_BUG, task)
    toml = (task / "task.toml").read_text()
    if not workdir:
        toml = toml.replace('workdir = "/app"\n', "")
    (task / "task.toml").write_text(
        toml.replace("[environment]\n", f'[environment]\ndocker_image = "{image}"\n')
    )
    assert not (task / "environment").exists()
    return task


def run(argv: list[str], env: dict[str, str], out: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    result = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    (episode,) = [json.loads(p.read_text()) for p in (out / "episodes").glob("*.json")]
    return summary, episode


def ares_run(task: Path, sandbox: str, policy: str, out: Path) -> list[str]:
    command = ["-m", "ares.cli.main", "run", "harbor", "--path", str(task), "--sandbox", sandbox]
    return [*command, "-p", policy, "--out", str(out)]


@pytest.mark.parametrize(("policy", "reward"), [("oracle", 1.0), ("null", 0.0)])
def test_local_backend_pulls_the_named_image_and_scores(
    debian_image: str, registry: Registry, tmp_path: Path, policy: str, reward: float
) -> None:
    env = {**os.environ, "ARES_CACHE_DIR": str(tmp_path / "cache"), "ARES_INSECURE_REGISTRIES": registry.host}
    env.pop("ARES_IMAGE_FALLBACK", None)  # a stand-in must never serve a named image
    out = tmp_path / "out"
    summary, episode = run(
        [sys.executable, *ares_run(task_dir(tmp_path, debian_image), "local", policy, out)], env, out
    )
    assert summary["statuses"] == {"finished": 1} and summary["mean_reward"] == reward
    image = episode["image"]
    assert image["requested"] == debian_image and image["source"] == "registry"
    assert image["digest"].startswith("sha256:") and image["served_by"] is None


@pytest.mark.skipif(not can_drop(), reason=SKIP_REASON)
@pytest.mark.parametrize(("policy", "reward"), [("oracle", 1.0), ("null", 0.0)])
def test_local_backend_unprivileged_pulls_and_scores(
    debian_image: str, registry: Registry, request: pytest.FixtureRequest, policy: str, reward: float
) -> None:
    python = nobody_python() or pytest.skip(SKIP_REASON)
    root = Path(tempfile.mkdtemp(prefix="ares-nobody-task-"))  # pytest's tmp dirs are root's (0700)
    request.addfinalizer(lambda: shutil.rmtree(root, ignore_errors=True))
    os.chmod(root, 0o755)
    task = task_dir(root, debian_image)
    home, out = root / "home", root / "out"
    for made in (home, out):
        made.mkdir()
        os.chown(made, 65534, 65534)
    site = sysconfig.get_paths()["purelib"]
    env = {
        "PATH": "/usr/bin:/bin", "HOME": str(home), "PYTHONPATH": f"{SRC}:{site}",
        "ARES_INSECURE_REGISTRIES": registry.host, "TMPDIR": str(home),
    }  # fmt: skip
    summary, episode = run([*NOBODY, python, *ares_run(task, "local", policy, out)], env, out)
    assert summary["statuses"] == {"finished": 1} and summary["mean_reward"] == reward
    assert episode["image"]["source"] == "registry"


@pytest.mark.parametrize(("policy", "reward"), [("oracle", 1.0), ("null", 0.0)])
def test_docker_backend_runs_the_same_task_dir(
    debian_image: str, registry: Registry, tmp_path: Path, policy: str, reward: float
) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sandbox" / "docker"))
    from docker_engine_kit import ensure_engine

    engine = ensure_engine()
    subprocess.run(["podman", "pull", "--quiet", "--tls-verify=false", debian_image], check=True, timeout=300)
    env = {**os.environ, "DOCKER_HOST": engine.base_url}
    out = tmp_path / "out"
    summary, episode = run(
        [sys.executable, *ares_run(task_dir(tmp_path, debian_image), "docker", policy, out)], env, out
    )
    assert summary["statuses"] == {"finished": 1} and summary["mean_reward"] == reward
    assert episode["image"]["requested"] == debian_image


@pytest.mark.parametrize("sandbox", ["local", "docker"])
def test_the_image_working_dir_env_and_labels_are_honoured(
    app_image_ref: str, registry: Registry, tmp_path: Path, sandbox: str
) -> None:
    """No `workdir` in task.toml: the task runs where the image's WorkingDir says (/app), with its Env."""
    env = {**os.environ, "ARES_CACHE_DIR": str(tmp_path / "cache"), "ARES_INSECURE_REGISTRIES": registry.host}
    if sandbox == "docker":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sandbox" / "docker"))
        from docker_engine_kit import ensure_engine

        env["DOCKER_HOST"] = ensure_engine().base_url
        subprocess.run(["podman", "pull", "--quiet", "--tls-verify=false", app_image_ref], check=True)
    task = task_dir(tmp_path, app_image_ref, workdir=False)
    (task / "solution" / "solve.sh").write_text(
        (task / "solution" / "solve.sh").read_text()
        + '[ "$ARES_IMAGE_MARK" = from-the-image ] || rm stats.py\n'
    )
    out = tmp_path / "out"
    summary, _ = run([sys.executable, *ares_run(task, sandbox, "oracle", out)], env, out)
    assert summary["statuses"] == {"finished": 1} and summary["mean_reward"] == 1.0


async def test_a_sandbox_of_a_pulled_image_starts_in_its_config(
    app_image_ref: str, registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ares.sandbox.base import IMAGE_WORKDIR, ImageSpec, SandboxSpec
    from ares.sandbox.local import LocalSandbox
    from ares.sandbox.local.images import set_default_builder

    monkeypatch.setenv("ARES_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ARES_INSECURE_REGISTRIES", registry.host)
    monkeypatch.delenv("ARES_IMAGE_FALLBACK", raising=False)
    set_default_builder(None)
    try:
        async with LocalSandbox(
            SandboxSpec(image=ImageSpec(name=app_image_ref), workdir=IMAGE_WORKDIR)
        ) as box:
            result = await box.exec('pwd; echo "$ARES_IMAGE_MARK"; id -u')
            assert result.stdout.split() == ["/app", "from-the-image", "0"]
            assert box.spec.workdir == "/app"
            identity = box.image_identity
            assert (
                identity is not None and identity.source == "registry" and identity.requested == app_image_ref
            )
    finally:
        set_default_builder(None)


@pytest.mark.parametrize("transport", ["oci", "docker-archive"])
async def test_a_sandbox_runs_an_image_from_a_layout_or_an_archive(
    debian_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, transport: str
) -> None:
    """Air-gapped: the image comes from a directory or a tarball that skopeo wrote, no registry."""
    from ares.sandbox.base import ImageSpec, SandboxSpec
    from ares.sandbox.local import LocalSandbox
    from ares.sandbox.local.images import set_default_builder

    name = f"oci:{tmp_path}/layout:deb" if transport == "oci" else f"docker-archive:{tmp_path}/deb.tar"
    target = name if transport == "oci" else f"{name}:{DEBIAN}"
    copy = ["skopeo", "copy", "-q", f"containers-storage:{DEBIAN}", target]
    await asyncio.to_thread(subprocess.run, copy, check=True, capture_output=True, timeout=300)
    monkeypatch.setenv("ARES_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ARES_IMAGE_FALLBACK", raising=False)
    set_default_builder(None)
    try:
        async with LocalSandbox(SandboxSpec(image=ImageSpec(name=name), workdir="/")) as box:
            assert (await box.exec("cat /etc/debian_version")).stdout.startswith("12.")
            identity = box.image_identity
            assert identity is not None and identity.source == transport and identity.requested == name
            assert identity.digest is not None and identity.digest.startswith("sha256:")
    finally:
        set_default_builder(None)
