"""Installing an agent from npm: pins are versions, npm missing or a binary not found give one clear
error, and the layer exposes the native binary as ``bin/<command>``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ares.agents.install.npm import AgentInstallError, NpmPackage, npm_addon

CODEX_LIKE = dict(
    agent="tool", package="@acme/tool", command="tool", binary="@acme/tool-linux-x64/vendor/*/bin/tool"
)


def test_a_package_is_pinned_to_a_version_and_keyed_by_everything_it_installs() -> None:
    for version in ("latest", "^1.2", "", "1.2 && curl x"):
        with pytest.raises(ValueError, match="not a pinned version"):
            NpmPackage(version=version, **CODEX_LIKE)
    package = NpmPackage(version="1.2.3", **CODEX_LIKE)
    assert package.executable == "/opt/ares/agents/tool-1.2.3/bin/tool"
    addon = npm_addon(package)
    assert addon.mount == "/opt/ares/agents/tool-1.2.3" and addon.key.startswith("agent-tool-1.2.3-")
    with_extra = npm_addon(NpmPackage(version="1.2.3", extras=("@acme/provider@2.0.0",), **CODEX_LIKE))
    assert with_extra.key != addon.key and with_extra.mount == addon.mount


async def test_without_npm_the_install_fails_saying_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no npm on it
    with pytest.raises(AgentInstallError, match=r"needs npm on the host \(apt install npm\)"):
        await NpmPackage(version="1.2.3", **CODEX_LIKE).populate(tmp_path / "dest")


def _fake_install(dest: Path, rel: str, executable: bool = True) -> None:
    binary = dest / "node_modules" / rel
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\necho native\n")
    os.chmod(binary, 0o755 if executable else 0o644)


def test_the_native_binary_is_linked_as_bin_command(tmp_path: Path) -> None:
    _fake_install(tmp_path, "@acme/tool-linux-x64/vendor/x86_64-unknown-linux-musl/bin/tool")
    NpmPackage(version="1.2.3", **CODEX_LIKE)._link_binary(tmp_path)
    link = tmp_path / "bin" / "tool"
    assert link.is_symlink() and not os.path.isabs(os.readlink(link))  # relative: valid at any mount
    assert link.resolve().read_text().endswith("echo native\n")


def test_a_package_whose_layout_changed_names_the_glob(tmp_path: Path) -> None:
    _fake_install(tmp_path, "@acme/tool-linux-x64/vendor/x86_64-unknown-linux-musl/tool", executable=True)
    _fake_install(tmp_path, "@acme/tool-linux-x64/vendor/other/bin/tool", executable=False)
    with pytest.raises(
        AgentInstallError, match=r"no native binary matches '@acme/tool-linux-x64/vendor/\*/bin/tool'"
    ):
        NpmPackage(version="1.2.3", **CODEX_LIKE)._link_binary(tmp_path)
