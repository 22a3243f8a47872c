"""``ares images pull|list|prune`` against the loopback registry (the registry fixtures live here)."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
from layer_kit import build_tar, entry, push_layers
from oci_registry_kit import Registry
from typer.testing import CliRunner

from ares.cli.main import app
from ares.images.cache import ImageCache
from ares.images.pull import image_store

runner = CliRunner()


def test_pull_list_prune(registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARES_INSECURE_REGISTRIES", registry.host)
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(tmp_path / "no-auth.json"))
    repo = f"ares/cli-{secrets.token_hex(4)}"
    layers = [build_tar([entry(f"f{i}", data=bytes(100_000 + i))]) for i in range(2)]
    digest = push_layers(registry, repo, "v1", layers)
    cache = str(tmp_path / "cache")
    name = f"{registry.host}/{repo}:v1"

    first = runner.invoke(app, ["images", "pull", name, "--cache-dir", cache], env={"COLUMNS": "250"})
    assert first.exit_code == 0, first.output
    assert f"pulled {name}@{digest}: 2 layers" in first.output and "(2 layers downloaded)" in first.output
    assert "layer" in first.output and ": done" in first.output  # per-layer lines (not a terminal)
    again = runner.invoke(app, ["images", "pull", name, "--cache-dir", cache, "--always"])
    assert again.exit_code == 0 and "moved 0.0 MB (0 layers downloaded)" in again.output

    listing = runner.invoke(app, ["images", "list", "--cache-dir", cache], env={"COLUMNS": "250"})
    assert listing.exit_code == 0 and name in listing.output and digest[7:19] in listing.output
    assert "pulled" in listing.output and "0.2 MB" in listing.output

    bad = runner.invoke(app, ["images", "pull", name, "--platform", "linux", "--cache-dir", cache])
    assert bad.exit_code == 2 and "os/arch[/variant]" in bad.output

    kept = runner.invoke(app, ["images", "prune", "--cache-dir", cache])
    assert kept.exit_code == 0 and "0 removed" in kept.output
    gone = runner.invoke(app, ["images", "prune", "--all", "--cache-dir", cache])
    assert gone.exit_code == 0 and "removed pulled image" in gone.output and "3 removed" in gone.output
    assert "0.2 MB of pulled layers freed" in gone.output
    assert image_store(ImageCache(Path(cache))).records() == []
