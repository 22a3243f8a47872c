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

What remains (the library code) is the agent's answer, and it does run inside the test process: a
change that rewrites pytest's reporting from library code is beyond what any log grader can see.
The exit status check in the grader catches the crude forms (printing fake ``PASSED`` lines).
"""

from __future__ import annotations

import posixpath

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


def dropped(path: str, workdir: str = WORKDIR) -> bool:
    """Whether the agent's version of ``path`` (absolute) stays out of the grader's sandbox.

    Anything outside ``workdir`` is dropped too (the verifier only carries ``workdir``; this keeps the
    rule whole if a caller carries more).
    """
    path = posixpath.normpath(path)
    if path != workdir and not path.startswith(workdir.rstrip("/") + "/"):
        return True
    parts = posixpath.relpath(path, workdir).split("/")
    return any(name in DROPPED_NAMES or name.endswith(DROPPED_SUFFIXES) for name in parts)
