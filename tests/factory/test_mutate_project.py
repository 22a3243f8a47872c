"""``candidates`` and ``combine`` on a real project: toolz 1.2.0, from the SWE fixtures' git bundle."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from mutate_helpers import git, git_apply

from ares.factory.mutate import STRATEGIES, Mutation, candidates, combine, diff

BUNDLE = Path(__file__).parents[1] / "fixtures" / "swe" / "images" / "toolz" / "toolz.bundle"


@pytest.fixture(scope="module")
def toolz(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A work tree of toolz 1.2.0 (any instance branch: they share the release's sources)."""
    root = tmp_path_factory.mktemp("toolz") / "toolz"
    git(root.parent, "clone", "-q", str(BUNDLE), str(root), check=False)
    branch = git(root, "for-each-ref", "--format=%(refname:short)", "refs/remotes/origin").stdout.split()[0]
    git(root, "checkout", "-q", branch)
    return root


@pytest.fixture(scope="module")
def everything(toolz: Path) -> list[Mutation]:
    return list(candidates(toolz, ["toolz"]))


def test_every_strategy_finds_candidates_in_toolz(everything: list[Mutation]) -> None:
    counts = Counter(m.strategy for m in everything)
    assert set(counts) == set(STRATEGIES), counts
    assert all(counts[s] > 0 for s in STRATEGIES)
    assert len(everything) > 1000


def test_no_tests_no_noops_no_duplicates(everything: list[Mutation]) -> None:
    paths = {m.path for m in everything}
    assert "toolz/itertoolz.py" in paths and "toolz/functoolz.py" in paths
    assert not any("/tests/" in p or Path(p).name.startswith("test_") for p in paths)
    assert all(m.after != m.before for m in everything)
    assert len({(m.path, m.after) for m in everything}) == len(everything)
    assert [m.path for m in everything] == sorted(m.path for m in everything)


def test_every_mutated_file_compiles(everything: list[Mutation]) -> None:
    for m in everything:
        compile(m.after, m.path, "exec", dont_inherit=True)


def test_every_diff_applies_and_is_small(toolz: Path, everything: list[Mutation]) -> None:
    for m in everything:
        patch = diff(m)
        body = patch.splitlines()[4:]  # after diff --git, ---, +++ and the first @@
        changed = [line for line in body if line[:1] in "+-"]
        assert 1 <= len(changed) <= 40, (m.strategy, m.qualname, patch)
        proc = git_apply(toolz, patch, "--check")
        assert proc.returncode == 0, (proc.stderr, patch)


def test_the_line_points_at_the_change(everything: list[Mutation]) -> None:
    for m in everything:
        before, after = m.before.split("\n"), m.after.split("\n")
        first_changed = next(i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b) + 1
        # The anchor is the mutated node; a multi-line node's change can lie a few lines below it.
        where = (m.strategy, m.line, first_changed)
        assert m.line <= first_changed + 1 and first_changed - m.line < 25, where


def test_same_seed_same_sample_and_the_limit_holds(toolz: Path) -> None:
    first = list(candidates(toolz, ["toolz"], seed=7, limit_per_function=2))
    again = list(candidates(toolz, ["toolz"], seed=7, limit_per_function=2))
    other = list(candidates(toolz, ["toolz"], seed=8, limit_per_function=2))
    assert first == again
    assert [m.after for m in first] != [m.after for m in other]
    per_function = Counter((m.path, m.qualname) for m in first)
    assert max(per_function.values()) == 2
    # Round-robin over strategies: a sample of two per function still spans many strategies.
    assert len({m.strategy for m in first}) >= 10


def test_combine_two_bugs_in_one_file_applies_both(toolz: Path, everything: list[Mutation]) -> None:
    in_file = [m for m in everything if m.path == "toolz/itertoolz.py"]
    a = next(m for m in in_file if m.strategy == "flip_comparison")
    b = next(m for m in in_file if m.strategy == "remove_statement" and m.qualname != a.qualname)
    both = combine([a, b])
    assert both is not None
    assert both.strategy == "combo:flip_comparison+remove_statement"
    assert both.qualname == f"{a.qualname}+{b.qualname}"
    assert both.line == min(a.line, b.line)
    # The combination is exactly "apply one diff, then the other" with real git.
    try:
        for m in (a, b):
            proc = git_apply(toolz, diff(m))
            assert proc.returncode == 0, proc.stderr
        assert (toolz / a.path).read_text() == both.after
        assert git_apply(toolz, diff(both), "-R", "--check").returncode == 0
    finally:
        git(toolz, "checkout", "--", a.path)
    compile(both.after, both.path, "exec", dont_inherit=True)


def test_combine_three_and_conflicts(everything: list[Mutation]) -> None:
    in_file = [m for m in everything if m.path == "toolz/functoolz.py"]
    by_function: dict[str, Mutation] = {}
    for m in in_file:
        by_function.setdefault(m.qualname, m)
    three = list(by_function.values())[:3]
    combo = combine(three)
    assert combo is not None and combo.strategy.count("+") == 2
    nested = combine([combine(three[:2]), three[2]])
    assert nested is not None and nested.after == combo.after and nested.strategy == combo.strategy
    # Two edits of the same line (or adjacent lines) conflict.
    same_line = [m for m in in_file if m.line == three[0].line and m.after != three[0].after]
    assert same_line and combine([three[0], same_line[0]]) is None
    with pytest.raises(ValueError, match="different files"):
        combine([three[0], next(m for m in everything if m.path != three[0].path)])
    with pytest.raises(ValueError, match="at least two"):
        combine([three[0]])
