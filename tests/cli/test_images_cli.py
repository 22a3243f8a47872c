"""``ares images build|list|prune`` against a private cache."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ares.cli.main import app
from ares.images.build.standins import host_python_version
from ares.images.cache import ImageCache

HOST_PY = ".".join((host_python_version() or "3.11").split(".")[:2])
runner = CliRunner()


def test_build_list_prune(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(f"FROM python:{HOST_PY}\nARG N=1\nRUN echo $N > /n\n")
    first = runner.invoke(app, ["images", "build", str(ctx), "--cache-dir", str(cache), "-t", "demo:1"])
    assert first.exit_code == 0, first.output
    assert "Step 3/3 : RUN echo $N > /n" in first.output and "2 built" in first.output

    args = ["images", "build", str(ctx), "--cache-dir", str(cache), "--build-arg", "N=2"]
    second = runner.invoke(app, args)
    assert second.exit_code == 0, second.output
    assert "Using cache" in second.output  # the base setup layer
    assert "1 built" in second.output  # the RUN, because the build arg changed

    listing = runner.invoke(app, ["images", "list", "--cache-dir", str(cache)], env={"COLUMNS": "200"})
    assert listing.exit_code == 0
    assert "demo:1" in listing.output and listing.output.count("ares/host-python") == 2

    # A layer no image references (e.g. left by a failed build) is pruned; used ones stay.
    orphan = cache / "layers" / ("0" * 64)
    (orphan / "fs").mkdir(parents=True)
    pruned = runner.invoke(app, ["images", "prune", "--cache-dir", str(cache)])
    assert pruned.exit_code == 0 and "1 removed" in pruned.output
    assert not orphan.exists() and len(ImageCache(cache).images()) == 2

    everything = runner.invoke(app, ["images", "prune", "--all", "--cache-dir", str(cache)])
    assert everything.exit_code == 0
    assert ImageCache(cache).images() == [] and not any((cache / "layers").iterdir())


def test_build_errors_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = runner.invoke(app, ["images", "build", str(tmp_path)])
    assert result.exit_code == 2 and "no Dockerfile" in result.output
    (tmp_path / "Dockerfile").write_text("FROM ubuntu:24.04\n")
    for name in ("HTTPS_PROXY", "https_proxy"):  # no registry is reachable
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    cache = ["--cache-dir", str(tmp_path / "c")]
    result = runner.invoke(app, ["images", "build", str(tmp_path), "--fallback", "off", *cache])
    assert (
        result.exit_code == 2
        and "FROM ubuntu:24.04: cannot pull it, no registry is reachable" in result.output
    )
    assert "ARES_IMAGE_FALLBACK=standin" in result.output
    result = runner.invoke(app, ["images", "build", str(tmp_path), "--build-arg", "nonsense"])
    assert result.exit_code == 2 and "KEY=VALUE" in result.output
