"""Which of the agent's files under /testbed reach the grader, and which are reset to the image's.

The verifier carries the agent's filesystem diff of the repository (its ``outputs``) into a fresh
sandbox of the pristine image. Some files there are not the agent's to change, because they steer the
grading tools rather than the code under test: they are dropped from the carried diff, so the image's
own version (or none) is what the grader sees. A legitimate fix never needs them:

* ``.git`` anywhere (config, hooks, refs, objects, index): the eval script's ``git checkout`` and
  ``git apply`` run on the image's repository, never one the agent rewrote;
* ``.gitattributes``/``.gitmodules``: attributes change how git checks out and applies the hidden
  test files (eol, filters, whitespace rules);
* pytest's hooks and configuration: ``conftest.py``, ``pytest.ini``, ``tox.ini``, ``setup.cfg``,
  ``pyproject.toml`` (``addopts = -p plugin``), and ``.pytest_cache``;
* Python's start-up hooks: ``sitecustomize.py``, ``usercustomize.py``, ``*.pth``;
* package metadata (``*.egg-info``, ``*.dist-info``, ``*.egg-link``): an editable install's
  ``entry_points.txt`` registers pytest plugins, and the image's build wrote these, not the agent;
* byte code (``__pycache__``, ``*.pyc``): a planted ``.pyc`` whose header matches an unchanged
  source file's size and mtime would run instead of that source (conftest.py included);
* ``.venv``: R2E-Gym images keep the test environment (pytest included) inside ``/testbed``.

Beyond those names, each instance resets its own **test trees** (``test_roots``): everything the
project's test discovery can import next to the hidden tests (a test package's ``__init__.py``,
helper modules, fixture data, an ``__init__.py`` the agent added) is the base commit's in the
grader's fork, since SWE images sit at ``base_commit``. The roots come from the hidden tests'
paths (the ``test_patch``'s files, or an R2E-Gym set's ``r2e_tests/``): for each, its topmost
ancestor dir named ``test``, ``tests`` or ``testing`` (``tests/`` at the root; ``pkg/tests/`` or
``pkg/sub/tests/`` inside the package), else the file itself (a ``test_x.py`` at the root or next
to the library code, which only that file's reset covers). The agent's edits there never reach
grading, and the exported model patch leaves them out as well (``diff_excludes``).

What remains (the library code) is the agent's answer, and it does run inside the test process: a
change that rewrites pytest's reporting from library code is what the integrity plugin watches for
(``ares.tasks.integrity``); the exit status checks (``tamper``) catch the crude forms.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

WORKDIR = "/testbed"
DROPPED_NAMES = frozenset(
    {
        ".git",
        ".gitattributes",
        ".gitmodules",
        "conftest.py",
        "pytest.ini",
        "tox.ini",
        "setup.cfg",
        "pyproject.toml",
        ".pytest_cache",
        "sitecustomize.py",
        "usercustomize.py",
        "__pycache__",
        ".venv",
    }
)
DROPPED_SUFFIXES = (".pth", ".pyc", ".pyo", ".egg-info", ".dist-info", ".egg-link")
#: Pathspecs that keep the same files out of the exported diff (git's ``:(exclude)`` magic).
DIFF_EXCLUDES: tuple[str, ...] = tuple(
    [f":(exclude,glob)**/{name}" for name in sorted(DROPPED_NAMES)]
    + [f":(exclude,glob)**/{name}/**" for name in sorted(DROPPED_NAMES)]
    + [f":(exclude,glob)**/*{suffix}" for suffix in DROPPED_SUFFIXES]
    + [f":(exclude,glob)**/*{suffix}/**" for suffix in DROPPED_SUFFIXES]
)


#: Dir names that start a test tree (``test_roots``).
TEST_DIR_NAMES = frozenset({"test", "tests", "testing"})


def test_roots(paths: Iterable[str]) -> tuple[str, ...]:
    """The test trees (relative to the workdir, sorted, none inside another) of the hidden tests at
    ``paths``: each path's topmost ancestor dir named in ``TEST_DIR_NAMES``, else the path itself."""
    roots: set[str] = set()
    for path in paths:
        parts = [p for p in posixpath.normpath(path).split("/") if p not in ("", ".")]
        if not parts or ".." in parts:
            continue
        top = next((i for i, name in enumerate(parts[:-1]) if name in TEST_DIR_NAMES), None)
        roots.add("/".join(parts if top is None else parts[: top + 1]))
    return tuple(r for r in sorted(roots) if not any(_within(r, o) for o in roots if o != r))


def dropped(path: str, workdir: str = WORKDIR, test_roots: Iterable[str] = ()) -> bool:
    """Whether the agent's version of ``path`` (absolute) stays out of the grader's sandbox: a name
    above, or a path in one of ``test_roots`` (relative to ``workdir``).

    Anything outside ``workdir`` is dropped too (the verifier only carries ``workdir``; this keeps the
    rule whole if a caller carries more).
    """
    path = posixpath.normpath(path)
    if path != workdir and not path.startswith(workdir.rstrip("/") + "/"):
        return True
    rel = posixpath.relpath(path, workdir)
    if any(_within(rel, root) for root in test_roots):
        return True
    return any(name in DROPPED_NAMES or name.endswith(DROPPED_SUFFIXES) for name in rel.split("/"))


def diff_excludes(test_roots: Iterable[str] = ()) -> tuple[str, ...]:
    """``DIFF_EXCLUDES`` plus the instance's test trees (a literal pathspec covers a dir's content)."""
    return DIFF_EXCLUDES + tuple(f":(exclude,literal){root}" for root in test_roots)


def _within(path: str, top: str) -> bool:
    return path == top or path.startswith(top + "/")
