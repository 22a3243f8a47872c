"""The verifier's carry on random hostile trees (``hostile_trees``), local and docker, root and nobody.

Property: the carry either carries exactly what ``drop`` allows or refuses with a named reason (one
the tree really breaks), never raises anything else, never touches anything a symlink points at,
and visits at most one entry past its bound. The local carry runs on a real overlay-upper layout;
the docker carry on a tar of the same tree (as the engine's archive API writes one).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from functools import partial
from pathlib import Path

import pytest
from hostile_trees import BOUNDS, MOUNTS, ROOT, TEST_ROOTS, Node, build, expectation, listing, trees
from hypothesis import HealthCheck, given, settings

from ares.core.rmtree import remove_tree
from ares.errors import OutputRefusedError
from ares.sandbox.carry_bounds import REASONS, CarryBudget
from ares.sandbox.docker.carry import CarryLimits, Listing, check_plan, list_archive, plan_carry
from ares.sandbox.local import diff, forks
from ares.tasks.swe import changes
from nobody_python import DROP, SKIP_REASON, can_drop, nobody_python

DROP_RULE = partial(changes.dropped, workdir=ROOT, test_roots=TEST_ROOTS)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


def _outside(where: Path) -> Path:
    outside = where / "outside"
    outside.mkdir()
    (outside / "secret").write_text("host")
    return outside


def check_local(nodes: list[Node]) -> None:
    where = Path(tempfile.mkdtemp(prefix="ares-carry-prop-"))
    try:
        outside = _outside(where)
        build(nodes, where / "upper", outside)
        layer = where / "layer"
        budget = CarryBudget(BOUNDS)
        reasons, kept = expectation(nodes)
        try:
            diff.carry_outputs(where / "upper", MOUNTS, [ROOT], layer)
            forks.filter_carried(layer, MOUNTS, [ROOT], DROP_RULE, where / "trash", budget)
        except OutputRefusedError as exc:
            assert exc.reason in REASONS and exc.reason in reasons, (exc, reasons)
        else:
            assert not reasons, f"carried a tree that breaks {reasons}"
            carried = listing(layer / "_root" / "testbed")
            assert set(carried) == kept
        assert budget.visited <= BOUNDS.max_entries + 1
        assert sorted(os.listdir(outside)) == ["secret"] and (outside / "secret").read_text() == "host"
    finally:
        remove_tree(where)


@SETTINGS
@given(trees())
def test_the_local_carry_carries_what_drop_allows_or_refuses(nodes: list[Node]) -> None:
    check_local(nodes)


def _tar_of(top: Path) -> tarfile.TarFile:
    """The archive of ``top`` as the engine writes one (members ``testbed``, ``testbed/...``)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(top, arcname="testbed", recursive=True)  # never dereferences; sockets are skipped
    buf.seek(0)
    return tarfile.open(fileobj=buf, mode="r:")


@pytest.mark.skipif(os.geteuid() != 0, reason="the engine archives as root (000 files included)")
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(trees(specials=False))
def test_the_docker_carry_carries_what_drop_allows_or_refuses(nodes: list[Node]) -> None:
    where = Path(tempfile.mkdtemp(prefix="ares-carry-prop-"))
    try:
        top = build(nodes, where / "upper", _outside(where))
        reasons, kept = expectation(nodes, docker=True)
        budget = CarryBudget(BOUNDS)
        try:
            with _tar_of(top) as tar:
                agent = list_archive(tar, ROOT, DROP_RULE, CarryLimits(), keep_members=True)
            plan = plan_carry(agent, Listing(), ROOT)
            check_plan(agent, plan, ROOT, budget)
        except OutputRefusedError as exc:
            assert exc.reason in REASONS and exc.reason in reasons, (exc, reasons)
        else:
            assert not reasons, f"carried a tree that breaks {reasons}"
            assert {os.fsencode(p.removeprefix(ROOT + "/")) for p in plan.carry} == kept
        assert budget.visited <= BOUNDS.max_entries + 1
    finally:
        remove_tree(where)


@pytest.mark.skipif(not can_drop(), reason=SKIP_REASON)
def test_the_local_carry_property_holds_unprivileged(request: pytest.FixtureRequest) -> None:
    """The local property as uid 65534 (modes bind the host's reads; no CAP_DAC_OVERRIDE)."""
    python = nobody_python() or pytest.skip(SKIP_REASON)
    home = Path(tempfile.mkdtemp(prefix="ares-nobody-carry-"))
    request.addfinalizer(lambda: shutil.rmtree(home, ignore_errors=True))
    os.chown(home, 65534, 65534)
    here, tests = Path(__file__).parent, Path(__file__).parents[1]
    src = Path(__file__).parents[2] / "src"
    env = {
        "PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(home),
        "PYTHONPATH": os.pathsep.join([str(src), str(here), str(tests), sysconfig.get_paths()["purelib"]]),
    }  # fmt: skip
    driver = (
        "from test_carry_property import check_local, SETTINGS\n"
        "from hostile_trees import trees\nfrom hypothesis import given\n"
        "given(trees())(SETTINGS(check_local))()\nprint('ok')\n"
    )
    done = subprocess.run([*DROP, python, "-c", driver], env=env, cwd=home, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-4000:]
    assert json.dumps(sys.version_info[:2])  # the child is of this Python (nobody_python checks)
