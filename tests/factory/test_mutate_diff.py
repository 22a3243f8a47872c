"""``diff``: the mutation as a patch that real ``git apply`` accepts forwards and backwards."""

from __future__ import annotations

from pathlib import Path

import pytest
from mutate_helpers import git, git_apply

from ares.factory.mutate import Mutation, candidates, diff


def _repo(tmp_path: Path, rel: str, data: bytes) -> Path:
    root = tmp_path / "repo"
    (root / rel).parent.mkdir(parents=True)
    (root / rel).write_bytes(data)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    return root


@pytest.mark.parametrize(
    "source",
    [
        b"import os\n\n\ndef f(x):\n    return x < 1\n",
        b"def f(x):\n    return x < 1",  # no newline at the end of the file
        # CRLF lines, and a form feed that str.splitlines would wrongly cut a line at.
        b"def f(x):\r\n    # a\x0cform feed\r\n    return x < 1\r\n",
    ],
    ids=["plain", "no-final-newline", "crlf-formfeed"],
)
def test_diff_applies_and_reverses_with_git(tmp_path: Path, source: bytes) -> None:
    root = _repo(tmp_path, "src/pkg/mod.py", source)
    [m] = candidates(root, ["src/pkg"], strategies=["flip_comparison"])
    assert m.path == "src/pkg/mod.py" and m.before.encode() == source
    patch = diff(m)
    head = "diff --git a/src/pkg/mod.py b/src/pkg/mod.py\n--- a/src/pkg/mod.py\n+++ b/src/pkg/mod.py\n@@"
    assert patch.startswith(head)
    assert git_apply(root, patch, "--check").returncode == 0
    assert git_apply(root, patch).returncode == 0
    assert (root / m.path).read_bytes() == m.after.encode()
    assert git_apply(root, patch, "-R").returncode == 0
    assert (root / m.path).read_bytes() == source


def test_diff_is_minimal(tmp_path: Path) -> None:
    before, after = "def f(x):\n    return x < 1\n", "def f(x):\n    return x <= 1\n"
    m = Mutation("flip_comparison", "a.py", "f", 2, "d", before, after)
    assert diff(m) == (
        "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n"
        "@@ -1,2 +1,2 @@\n def f(x):\n-    return x < 1\n+    return x <= 1\n"
    )


def test_test_files_are_never_mutated(tmp_path: Path) -> None:
    body = b"def f(x):\n    return x < 1\n"
    root = tmp_path / "p"
    names = ("core.py", "tests/helpers.py", "test_core.py", "core_test.py", "conftest.py", ".hidden/x.py")
    for rel in (f"pkg/{name}" for name in names):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(body)
    assert [m.path for m in candidates(root, ["pkg"], strategies=["flip_comparison"])] == ["pkg/core.py"]


def test_diff_stays_minimal_next_to_a_look_alike_region(tmp_path: Path) -> None:
    """boltons' namedutils.py holds two near-identical functions (namedtuple, namedlist): difflib's
    junk heuristic once paired a change with the other copy, a 159-line hunk for a one-token edit."""
    bundle = Path(__file__).parents[1] / "fixtures" / "swe" / "images" / "boltons" / "boltons.bundle"
    clone = tmp_path / "boltons"
    git(tmp_path, "clone", "-q", str(bundle), str(clone), check=False)
    ref = git(clone, "for-each-ref", "--format=%(refname:short)", "refs/remotes/origin").stdout.split()[0]
    source = git(clone, "show", f"{ref}:boltons/namedutils.py").stdout
    root = _repo(tmp_path, "pkg/namedutils.py", source.encode())
    found = list(candidates(root, ["pkg"], strategies=["flip_comparison"]))
    assert len(found) >= 8
    for m in found:
        patch = diff(m)
        changed = [line for line in patch.splitlines()[4:] if line[:1] in "+-"]
        assert len(changed) == 2, patch
        assert git_apply(root, patch, "--check").returncode == 0
