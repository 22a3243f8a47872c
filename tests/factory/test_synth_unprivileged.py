"""The factory run by an unprivileged host user (uid 65534, its own image cache): it makes a set, the
set grades (oracle 1, null 0), and from the agent's sandbox the original source is out of reach."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path

import pytest
from synth_sources import plain_dir
from test_synth_factory import SOURCE_PROBE, git_out

from ares.tasks.swe.harness import swebench_available
from nobody_python import SKIP_REASON, can_drop, nobody_python

SRC = Path(__file__).parents[2] / "src"
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
#: Played as nobody after the CLI made the set: oracle and null on its first instance, then the probe.
DRIVER = """
import asyncio, json, sys
from ares.policies import make_policy
from ares.presets import make
from ares.rollout.runner import run_episode

async def main(path, task, probe):
    out = {}
    for policy in ("oracle", "null"):
        async with make("swebench", path=path, tasks=task) as env:
            result = await run_episode(env, make_policy(policy), index=0, task=0, seed=0)
        out[policy] = [str(result.status), result.reward, result.record.get("error")]
    async with make("swebench", path=path, tasks=task) as env:
        await env.reset()
        out["probe"] = (await env.sandbox.exec(probe, cwd="/testbed", timeout_s=120)).stdout.split()
    print(json.dumps(out))

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
"""

pytestmark = [
    pytest.mark.skipif(not swebench_available(), reason="needs swebench + unidiff (ares[swe])"),
    pytest.mark.skipif(not can_drop(), reason=SKIP_REASON),
]


def test_nobody_makes_a_set_that_grades_and_keeps_the_source_out_of_reach(
    clones: dict[str, Path], request: pytest.FixtureRequest
) -> None:
    python = nobody_python() or pytest.skip(SKIP_REASON)
    home = Path(tempfile.mkdtemp(prefix="ares-nobody-synth-"))  # pytest's tmp dirs are root's (0700)
    request.addfinalizer(lambda: shutil.rmtree(home, ignore_errors=True))
    source = plain_dir(clones["toolz"], home / "toolz")
    subprocess.run(["chown", "-R", "65534:65534", str(home)], check=True)
    site = sysconfig.get_paths()["purelib"]
    env = {
        "PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(home), "ARES_IMAGE_FALLBACK": "offline",
        "PYTHONPATH": os.pathsep.join([str(SRC), site]),
    }  # fmt: skip
    out = home / "set"
    made = subprocess.run(
        [*NOBODY, python, "-m", "ares.cli.main", "tasks", "synth", str(source), "--out", str(out),
         "--strategies", "flip_comparison", "--max-candidates", "3", "--combinations", "0"],
        env=env, cwd=home, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    rows = [json.loads(line) for line in (out / "instances.jsonl").read_text().splitlines()]
    assert rows and all(row["image"].startswith("ares-synth/toolz:1.2.0-") for row in rows)
    assert (out / "work" / "repo").stat().st_uid == 65534  # nothing of the set was made as root

    row = rows[0]
    fixed_path = row["patch"].split(" b/", 1)[1].split("\n", 1)[0]
    pristine = row["environment_setup_commit"]
    blob = git_out(out / "work" / "repo", "-c", f"safe.directory={out / 'work' / 'repo'}", "rev-parse",
                   f"{pristine}:{fixed_path}")  # fmt: skip
    probe = SOURCE_PROBE.format(pristine=pristine, blob=blob, hidden=row["synth"]["hidden_tests"][0])
    played = subprocess.run(
        [*NOBODY, python, "-c", DRIVER, str(out), row["instance_id"], probe],
        env=env, cwd=home, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert played.returncode == 0, played.stderr[-3000:]
    seen = json.loads(played.stdout.strip().splitlines()[-1])
    assert seen["oracle"][:2] == ["finished", 1.0], seen
    assert seen["null"][:2] == ["finished", 0.0], seen
    assert seen["probe"] == [
        "all=1", "refs=0", "pristine=absent", "blob=absent", "hidden=absent", "pip=failed", "archives=0"
    ]  # fmt: skip
