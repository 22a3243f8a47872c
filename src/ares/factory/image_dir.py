"""The image a project's tasks run in, as a Dockerfile dir: the one-commit repository at /testbed,
installed editable with its test dependencies at build time (the sandbox's network is off at run
time), and nothing left behind that holds the original source (no bundle, no pip cache, no archive).
What the install wrote into /testbed is settled so ``git status`` starts clean: tracked files it
rewrote (an sdist's egg-info) are restored, new ones (build metadata) are excluded."""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
from pathlib import Path

from ares.errors import TaskError
from ares.factory._proc import GIT_ENV, GIT_OPTS
from ares.factory.gitrepo import BRANCH
from ares.factory.project import Project

BASE = "ares/host-python"
PREFIX = "ares-synth"
BUNDLE = "project.bundle"
#: The synthesized instances' base commits, fetched in a last layer so the install above stays cached.
INSTANCES_BUNDLE = "instances.bundle"
_INSTANCES = """\
COPY {bundle} /tmp/{bundle}
RUN git -C /testbed fetch -q /tmp/{bundle} 'refs/heads/*:refs/heads/*' \\
 && rm -f /tmp/{bundle} /testbed/.git/FETCH_HEAD
"""

_TEMPLATE = """\
# {name} {version} ({licence}): the release at /testbed as one root commit, installed
# editable with its test dependencies. Built by ares.factory.image_dir.
FROM {image}
COPY {bundle} /tmp/{bundle}
RUN git init -q -b {branch} /testbed \\
 && git -C /testbed fetch -q /tmp/{bundle} {branch} \\
 && git -C /testbed reset -q --hard {base} \\
 && rm -f /tmp/{bundle} /testbed/.git/FETCH_HEAD
RUN export PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \\
 && python -m pip install -q {deps} \\
 && python -m pip install -q -e /testbed \\
 && (python -m pip cache purge >/dev/null 2>&1 || true) \\
 && rm -rf /root/.cache/pip /tmp/pip-* \\
 && git -C /testbed checkout -q -- . \\
 && git -C /testbed ls-files -o --directory --exclude-standard >> /testbed/.git/info/exclude \\
 && if find / -xdev -path /testbed -prune -o \\( -iname {archive_glob}.tar.gz -o -iname {archive_glob}.zip \\
      -o -iname {wheel_glob}.whl \\) -print -quit 2>/dev/null | grep -q .; \\
    then echo "an archive of {name} is left in the image" >&2; exit 1; fi
WORKDIR /testbed
"""


def image_tag(project: Project, instance_refs: tuple[str, ...] = ()) -> str:
    """``ares-synth/<name>:<version>-<digest>``, the digest over what the image holds (the project's
    tree, its test deps, the instances' base commits): two sets of one release never share a tag, so
    making one cannot swap the image under the other's instances."""
    content = "\n".join([project.base_commit, *project.test_deps, "--", *sorted(instance_refs)])
    digest = hashlib.sha256(content.encode()).hexdigest()[:12]
    return f"{PREFIX}/{project.name}:{project.version}-{digest}"


def write_image_dir(
    project: Project, dest: Path, *, base: str = BASE, instance_refs: tuple[str, ...] = ()
) -> Path:
    """Write ``dest/Dockerfile`` and the repository's bundle; ``dest`` (for ``ImageBuilder.build``).

    ``instance_refs`` (branch names in the project's repository) are carried in a second bundle,
    fetched in the image's last layer: every synthesized instance's base commit is in /testbed's
    repository (the SWE environment's hygiene step cuts each instance's image down to its own)."""
    dest.mkdir(parents=True, exist_ok=True)
    _bundle(project.root, dest / BUNDLE, [BRANCH])
    (dest / INSTANCES_BUNDLE).unlink(missing_ok=True)
    if instance_refs:
        _bundle(project.root, dest / INSTANCES_BUNDLE, [f"refs/heads/{ref}" for ref in instance_refs])
    dist = project.name.replace("-", "_").replace(".", "_")
    text = _TEMPLATE.format(
        name=project.name,
        version=project.version,
        licence=project.licence or "licence unknown",
        base=project.base_commit,
        image=base,
        bundle=BUNDLE,
        branch=BRANCH,
        deps=" ".join(shlex.quote(d) for d in project.test_deps),
        archive_glob=shlex.quote(f"{project.name}-*"),
        wheel_glob=shlex.quote(f"{dist}-*"),
    )
    if instance_refs:
        workdir = text.rindex("WORKDIR /testbed")
        text = text[:workdir] + _INSTANCES.format(bundle=INSTANCES_BUNDLE) + text[workdir:]
    (dest / "Dockerfile").write_text(text)
    return dest


def _bundle(repo: Path, bundle: Path, refs: list[str]) -> None:
    bundle.unlink(missing_ok=True)
    cmd = ["git", *GIT_OPTS, "-C", str(repo), "bundle", "create", "-q", str(bundle.resolve()), *refs]
    done = subprocess.run(cmd, env={**os.environ, **GIT_ENV}, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise TaskError(f"git bundle of {repo} failed: {done.stderr.strip() or done.returncode}")
