"""No leaked answers in the repository an instance image ships.

Official images clone the whole project: ``/testbed/.git`` holds the commits after ``base_commit``
(the fix among them), tags, remote refs and reflogs. An agent with ``git log --all`` or ``git show``
would read the answer. So an image named by the instance (a registry image, not one of our Dockerfile
dirs, which do this themselves) runs through a derived image, built once and cached like any layer:
``FROM <image>`` plus one step that checks out ``base_commit`` detached, deletes every ref (branches,
tags, remotes, stash, notes, replace refs) and remote, expires every reflog, folds in and drops any
alternate object store, and prunes everything unreachable. What is left is the history up to
``base_commit`` and nothing after it. A repository that cannot be put at ``base_commit`` (missing
commit, a checkout that conflicts) fails the build with git's message instead of leaking.
"""

from __future__ import annotations

import hashlib
import os
import shlex
from pathlib import Path

from ares.images.cache import default_cache_dir
from ares.sandbox.base import ImageSpec
from ares.tasks.swe.changes import WORKDIR

#: git with no hooks, no automatic gc and no chatter: the image's own git, on the image's own repository.
_GIT_FUNCTION = 'g() { git -c core.hooksPath=/dev/null -c gc.auto=0 -c advice.detachedHead=false "$@"; }'


def hygiene_script(base_commit: str, repo: str = WORKDIR) -> str:
    """One shell line (a Dockerfile ``RUN``) leaving ``repo`` at ``base_commit`` with no other history."""
    base, where = shlex.quote(base_commit), shlex.quote(repo)
    steps = [
        "set -e",
        f"if [ ! -d {where}/.git ]; then exit 0; fi",
        f"cd {where}",
        _GIT_FUNCTION,
        f"g checkout -q --detach {base}",
        "g for-each-ref --format='%(refname)' | while read -r ref; do g update-ref -d \"$ref\"; done",
        'for remote in $(g remote); do g remote remove "$remote"; done',
        "if [ -s .git/objects/info/alternates ]; then g repack -a -d -q; fi",
        "rm -f .git/objects/info/alternates",
        "g reflog expire --expire=now --all",
        "g worktree prune",
        "rm -f .git/ORIG_HEAD .git/FETCH_HEAD .git/MERGE_HEAD .git/CHERRY_PICK_HEAD",
        "g gc -q --prune=now",
    ]
    return "; ".join(steps)


def clean_image(name: str, base_commit: str, cache_dir: Path | None = None) -> ImageSpec:
    """The derived image of ``name`` whose /testbed holds only history up to ``base_commit``.

    Its Dockerfile is written once under the cache (``swe/clean-images/<digest>/``); the builder
    caches the step like any other, so the clean-up runs once per (image, commit), not per reset.
    """
    text = (
        f"# {name} with /testbed's history cut at {base_commit} (ares.tasks.swe.hygiene)\n"
        f"FROM {name}\nRUN {hygiene_script(base_commit)}\n"
    )
    digest = hashlib.sha256(text.encode()).hexdigest()[:24]
    home = (cache_dir or default_cache_dir()) / "swe" / "clean-images" / digest
    dockerfile = home / "Dockerfile"
    if not dockerfile.is_file() or dockerfile.read_text() != text:
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        scratch = home / f".Dockerfile.{os.getpid()}"
        scratch.write_text(text)
        os.replace(scratch, dockerfile)
    return ImageSpec(dockerfile_dir=home)
