"""Named images are pulled; a stand-in serves one only when the fallback is on, and says so."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from oci_registry_kit import free_port

from ares.errors import FIX, ImageBuildError
from ares.images.build import reach
from ares.images.build.bases import FALLBACK_ENV, fallback_mode
from ares.images.build.standins import ensure_debian_root, host_python_version
from ares.images.cache import ImageCache
from ares.images.errors import ImageError
from ares.images.progress import ImageEvent, PullEvent
from ares.sandbox.local.images import image_sandbox, local_builder

PY = ".".join((host_python_version() or "3.11").split(".")[:2])


@pytest.fixture
def no_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every HTTPS connection goes to a proxy that is not there: no registry is reachable."""
    dead = f"http://127.0.0.1:{free_port()}"
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, dead)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)


def context(root: Path, dockerfile: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "Dockerfile").write_text(dockerfile)
    return root


async def test_offline_with_the_fallback_off_fails_in_one_line(no_registry: None, tmp_path: Path) -> None:
    builder = local_builder(ImageCache(tmp_path / "cache"), fallback="off")
    with pytest.raises(ImageBuildError) as caught:
        await builder.build(context(tmp_path / "ctx", "FROM ubuntu:24.04\nRUN true\n"))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("FROM ubuntu:24.04: cannot pull it, no registry is reachable (")
    assert f"set {FALLBACK_ENV}=standin" in message and "--fallback standin" in message


async def test_a_stand_in_name_needs_no_fallback(tmp_path: Path) -> None:
    async def refuse(name: str, **options: Any) -> Any:
        raise AssertionError(f"{name} must not be pulled")

    builder = local_builder(ImageCache(tmp_path / "cache"), fallback="off", puller=refuse)
    image = await builder.build(
        context(tmp_path / "ctx", "FROM ares/host-python\nRUN python -c 'print(1)' > /one\n")
    )
    assert image.base == "ares/host-python" and image.substitutions == ()
    async with image_sandbox(image) as sandbox:
        assert (await sandbox.read_file("/one")) == b"1\n"


async def test_fallback_standin_serves_python_only_when_no_registry_answers(tmp_path: Path) -> None:
    calls: list[str] = []

    async def offline(name: str, **options: Any) -> Any:
        calls.append(name)
        raise ImageError(f"cannot reach docker.io for {name}") from httpx.ConnectError("no route")

    async def refused(name: str, **options: Any) -> Any:
        raise ImageError(f"{name}: not found on docker.io (HTTP 404)")

    cache = ImageCache(tmp_path / "cache")
    text = f"FROM python:{PY}-slim\nRUN true\n"
    image = await local_builder(cache, fallback="standin", puller=offline).build(
        context(tmp_path / "a", text)
    )
    assert calls == [f"python:{PY}-slim"]
    assert image.served_by == "ares/host-python"
    sub = image.substitutions[0]
    assert sub.requested == f"python:{PY}-slim" and "no registry reachable" in sub.reason
    record = cache.find(image.key)
    assert record is not None and record.substitutions[0]["served_by"] == "ares/host-python"
    assert (await local_builder(cache).load(record)).served_by == "ares/host-python"
    reach.forget()  # the run above learned docker.io out of reach; these are other machines
    # A registry that answers "no such image" is not an offline machine: no stand-in then.
    with pytest.raises(ImageBuildError, match=r"FROM python:\S+: python\S+: not found on docker.io"):
        await local_builder(cache, fallback="standin", puller=refused).build(context(tmp_path / "b", text))
    # Nor for a name no stand-in can serve: the error says what can make it available instead.
    with pytest.raises(ImageBuildError, match="no registry is reachable") as caught:
        await local_builder(cache, fallback="standin", puller=offline).build(
            context(tmp_path / "c", "FROM node:20\n")
        )
    assert "; to fix: no stand-in can serve node:20 " in str(caught.value)
    assert "ARES_REGISTRY_MIRRORS=docker.io=" in str(caught.value) and "\n" not in str(caught.value)


async def test_offline_standin_learns_the_registry_once_and_reports_substitutions(
    no_registry: None, tmp_path: Path
) -> None:
    """The real puller against an unreachable docker.io: one lookup, then every image goes straight to
    its stand-in; no "pull FAILED" event, a substitution event per image instead."""
    events: list[ImageEvent] = []
    builder = local_builder(ImageCache(tmp_path / "cache"), fallback="standin", on_event=events.append)
    for index, tag in enumerate((f"{PY}-slim", PY, f"{PY}-slim")):
        image = await builder.build(context(tmp_path / f"ctx{index}", f"FROM python:{tag}\nRUN true\n"))
        assert image.served_by == "ares/host-python"
    pulls = [e for e in events if isinstance(e, PullEvent) and e.layer is None]
    assert [e.state for e in pulls] == ["resolving", "substituted", "substituted", "substituted"]
    first, *later = (e.describe() for e in pulls[1:])
    assert first.startswith(f"python:{PY}-slim: no registry in reach (cannot reach docker.io")
    assert first.endswith(f"served by stand-in ares/host-python (the host's Python {host_python_version()})")
    assert all("(docker.io out of reach, found earlier in this run)" in line for line in later)
    assert list(reach.unreachable_registries()) == ["docker.io"]


async def test_remedies_name_only_what_can_serve_the_image(no_registry: None, tmp_path: Path) -> None:
    cache = ImageCache(tmp_path / "cache")
    for fallback in ("off", "standin"):
        with pytest.raises(ImageBuildError) as caught:
            await local_builder(cache, fallback=fallback).build(
                context(tmp_path / fallback, "FROM ares-swe/boltons:26.2.0\n")
            )
        message = str(caught.value)
        problem, _, remedy = message.partition(FIX)
        assert problem.startswith("FROM ares-swe/boltons:26.2.0: cannot pull it, no registry is reachable (")
        assert "no stand-in can serve ares-swe/boltons:26.2.0" in remedy and FALLBACK_ENV not in remedy
        assert "`ares images build DIR -t ares-swe/boltons:26.2.0`" in remedy
        assert "images/boltons/Dockerfile" in remedy and "oci:DIR[:TAG]" in remedy


def test_the_switch_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FALLBACK_ENV, raising=False)
    assert fallback_mode() == "off"
    monkeypatch.setenv(FALLBACK_ENV, "standin")
    assert fallback_mode() == "standin" and fallback_mode("off") == "off"
    monkeypatch.setenv(FALLBACK_ENV, "sometimes")
    with pytest.raises(ImageBuildError, match="ARES_IMAGE_FALLBACK='sometimes' is not one of off, standin"):
        fallback_mode()


@pytest.mark.skipif(
    os.geteuid() != 0 or not (shutil.which("debootstrap") or Path("/usr/sbin/debootstrap").exists()),
    reason="the Debian stand-in needs root and debootstrap",
)
async def test_offline_with_the_fallback_on_debian_serves_ubuntu_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = ImageCache(Path(os.environ["ARES_CACHE_DIR"]))
    await ensure_debian_root(cache)  # before the registry goes away (debootstrap fetches over http)
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("https_proxy", os.environ["HTTPS_PROXY"])
    lines: list[str] = []
    builder = local_builder(cache, fallback="standin", on_log=lines.append)
    image = await builder.build(context(tmp_path / "ctx", "FROM ubuntu:24.04\nRUN echo ok > /ok\n"))
    assert image.base == image.served_by == "ares/debian:bookworm"
    sub = image.substitutions[0]
    assert sub.requested == "ubuntu:24.04" and "Debian bookworm" in sub.reason
    assert any("ubuntu:24.04 was served by the stand-in ares/debian:bookworm" in line for line in lines)
    async with image_sandbox(image) as sandbox:
        assert "bookworm" in (await sandbox.read_file("/etc/os-release")).decode()
        assert (await sandbox.read_file("/ok")) == b"ok\n"
