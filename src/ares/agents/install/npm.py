"""An agent installed from npm into an add-on layer, once per (agent, version).

``npm install --ignore-scripts`` runs on the host into the layer's cache dir: no package's own
install script ever runs on the host, so nothing but npm's fetch-and-unpack touches it. The three
coding CLIs ship their native binary as a platform-specific optional dependency, which npm picks
without any script; ``binary`` says where it lands, and the layer gets ``bin/<command>`` pointing at
it. The registry is npm's own config (``~/.npmrc``, ``$npm_config_registry``) unless
``$ARES_NPM_REGISTRY`` names a mirror. Nothing is vendored: the files come when a user asks for the
agent, from the registry, at the pinned version.
"""

from __future__ import annotations

import asyncio
import glob
import hashlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ares.errors import AgentError
from ares.sandbox.addons import AddonLayer

#: Where installed agents appear inside a sandbox: ``<AGENTS_ROOT>/<agent>-<version>/bin/<command>``.
AGENTS_ROOT = "/opt/ares/agents"
#: Bound on one ``npm install`` (a cold cache downloads a few hundred MB).
NPM_TIMEOUT_S = 900.0
_VERSION = re.compile(r"^[0-9][0-9A-Za-z.+-]*$")


class AgentInstallError(AgentError):
    """An agent could not be installed (npm missing or failing, a binary not where it should be)."""


@dataclass(frozen=True, slots=True)
class NpmPackage:
    """``package@version`` from npm; ``binary`` is a glob (relative to ``node_modules``) matching the
    native executable, exposed as ``bin/<command>``; ``extras`` are more ``name@version`` specs
    installed beside it (e.g. a provider package the CLI would otherwise fetch at run time)."""

    agent: str
    package: str
    version: str
    command: str
    binary: str
    extras: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not _VERSION.match(self.version):
            raise ValueError(f"{self.agent}: {self.version!r} is not a pinned version (like 1.2.3)")

    @property
    def home(self) -> str:
        """This install's dir inside the sandbox."""
        return f"{AGENTS_ROOT}/{self.agent}-{self.version}"

    @property
    def executable(self) -> str:
        """The CLI's path inside the sandbox."""
        return f"{self.home}/bin/{self.command}"

    async def populate(self, dest: Path) -> None:
        npm = shutil.which("npm")
        if npm is None:
            raise AgentInstallError(
                f"installing {self.agent} {self.version} needs npm on the host (apt install npm); "
                "it is used once, to fetch the package into ARES's cache"
            )
        args = [npm, "install", "--prefix", str(dest), "--ignore-scripts", "--no-audit", "--no-fund"]
        args += ["--no-package-lock", "--omit=dev", "--loglevel=error"]
        if registry := os.environ.get("ARES_NPM_REGISTRY"):
            args += ["--registry", registry]
        args += [f"{self.package}@{self.version}", *self.extras]
        proc = await asyncio.create_subprocess_exec(
            *args, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, cwd=dest,
        )  # fmt: skip
        try:
            out, err = await asyncio.wait_for(proc.communicate(), NPM_TIMEOUT_S)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise AgentInstallError(
                f"npm install of {self.package}@{self.version} took over {NPM_TIMEOUT_S:.0f} s"
            ) from None
        if proc.returncode != 0:
            tail = (err or out).decode(errors="replace").strip()[-1500:]
            raise AgentInstallError(f"npm install of {self.package}@{self.version} failed: {tail}")
        await asyncio.to_thread(self._link_binary, dest)

    def _link_binary(self, dest: Path) -> None:
        modules = dest / "node_modules"
        found = sorted(glob.glob(self.binary, root_dir=modules))
        native = [p for p in found if (modules / p).is_file() and os.access(modules / p, os.X_OK)]
        if not native:
            raise AgentInstallError(
                f"{self.package}@{self.version} installed, but no native binary matches {self.binary!r} "
                "under node_modules (this platform may be unsupported, or the package changed its layout)"
            )
        (dest / "bin").mkdir(exist_ok=True)
        link = dest / "bin" / self.command
        link.symlink_to(os.path.relpath(modules / native[0], dest / "bin"))
        (dest / "package.json").unlink(missing_ok=True)  # npm's record of this prefix; not needed inside


def npm_addon(package: NpmPackage) -> AddonLayer:
    """The add-on layer that shows ``package``'s install at ``package.home`` in a sandbox."""
    what = "\0".join((package.package, package.version, package.binary, package.command, *package.extras))
    digest = hashlib.sha256(what.encode()).hexdigest()[:12]
    key = f"agent-{package.agent}-{package.version}-{digest}"
    return AddonLayer(key=key, mount=package.home, source=package)
