"""Image directories: Dockerfiles that provide named images, built the first time a build needs them.

A set of tasks may ship the images it names: in a directory of image Dockerfiles, ``NAME/Dockerfile``
provides every image whose repository ends in ``NAME`` (``ares-swe/toolz:1.2.0``,
``registry:5000/team/toolz:2`` -> ``toolz/Dockerfile``). ``FROM`` such a name builds that Dockerfile
(its layers are cached like any build, so only a changed line rebuilds) and tags the result with the
full name; it wins over an older image of that tag in the cache and over a pull, so editing the
Dockerfile is enough to use the new image.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ares.images.build.standins import canonical_name


def dockerfile_dir_for(name: str, image_dirs: Iterable[Path]) -> Path | None:
    """The directory whose ``Dockerfile`` provides ``name``, from the first of ``image_dirs`` that has one."""
    repository = canonical_name(name).rpartition(":")[0]
    last = repository.rsplit("/", 1)[-1]
    if last in ("", ".", ".."):
        return None
    for root in image_dirs:
        candidate = Path(root) / last
        if (candidate / "Dockerfile").is_file():
            return candidate
    return None
