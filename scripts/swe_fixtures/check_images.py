"""Build the fixture images with the ARES local builder and grade every instance inside its image.

For each row of tests/fixtures/swe/instances.jsonl: build ``images/<project>`` (tag
``ares-swe/<project>:<version>``) and ``images/instances/<id>`` (tag ``ares-swe/<project>.<n>:<version>``),
then in a fresh sandbox of the instance image check that /testbed is at ``base_commit`` with no other
commit reachable from any ref, run the SWE-bench-style eval script (test_patch + ``pytest -rA``) and check
every FAIL_TO_PASS fails and every PASS_TO_PASS passes; in another fresh sandbox apply ``patch`` first and
check everything passes. Writes tests/fixtures/swe/image_validation.json.

    .venv/bin/python scripts/swe_fixtures/check_images.py [--only toolz,click]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from ares.images.build.model import LocalImage
from ares.sandbox.local.images import image_sandbox, local_builder

sys.path.insert(0, str(Path(__file__).resolve().parent))

from make_instances import OUT, PROJECTS, eval_script, parse_pytest

HEREDOC = "EOF_ARES_FIXTURE_7731"


async def graded(image: LocalImage, row: dict, with_patch: bool) -> tuple[dict[str, str], dict[str, str]]:
    test_files = sorted(
        {line[len("+++ b/") :] for line in row["test_patch"].splitlines() if line.startswith("+++ b/")}
    )
    script = eval_script(row["base_commit"], test_files, row["test_patch"])
    async with image_sandbox(image) as box:
        facts = {
            "head": (await box.exec("git -C /testbed rev-parse HEAD")).stdout.strip(),
            "commits": (await box.exec("git -C /testbed rev-list --all | wc -l")).stdout.strip(),
            "refs": (await box.exec("git -C /testbed for-each-ref | wc -l")).stdout.strip(),
        }
        if with_patch:
            res = await box.exec(f"cd /testbed && git apply - <<'{HEREDOC}'\n{row['patch']}{HEREDOC}\n")
            if res.exit_code != 0:
                raise RuntimeError(f"{row['instance_id']}: gold patch does not apply: {res.stderr}")
        await box.exec(f"cat > /tmp/eval.sh <<'{HEREDOC}'\n{script}{HEREDOC}\n")
        res = await box.exec(
            "bash /tmp/eval.sh > /tmp/eval.log 2>&1; grep -E '^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) ' "
            "/tmp/eval.log",
            timeout_s=600,
        )
        return parse_pytest(res.stdout), facts


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    only = [p for p in args.only.split(",") if p] or list(PROJECTS)
    rows = [json.loads(line) for line in (OUT / "instances.jsonl").read_text().splitlines()]
    builder = local_builder()
    report: dict[str, dict] = {}
    bad = 0
    for name in only:
        project = PROJECTS[name]
        await builder.build(OUT / "images" / name, tags=(f"ares-swe/{name}:{project.version}",))
        for row in (r for r in rows if r["repo"] == project.repo):
            iid = row["instance_id"]
            number = iid.rsplit("-", 1)[1]
            started = time.monotonic()
            image = await builder.build(
                OUT / "images" / "instances" / iid, tags=(f"ares-swe/{name}.{number}:{project.version}",)
            )
            f2p, p2p = json.loads(row["FAIL_TO_PASS"]), json.loads(row["PASS_TO_PASS"])
            before, facts = await graded(image, row, with_patch=False)
            after, _ = await graded(image, row, with_patch=True)
            problems = []
            if facts != {"head": row["base_commit"], "commits": "1", "refs": "0"}:
                problems.append(f"repo state {facts}")
            problems += [f"F2P {t} is {before.get(t)} before" for t in f2p if before.get(t) == "PASSED"]
            problems += [f"F2P {t} missing before" for t in f2p if t not in before]
            problems += [f"P2P {t} is {before.get(t)} before" for t in p2p if before.get(t) != "PASSED"]
            problems += [f"{t} is {after.get(t)} after" for t in f2p + p2p if after.get(t) != "PASSED"]
            bad += bool(problems)
            report[iid] = {
                "image": f"ares-swe/{name}.{number}:{project.version}",
                "image_key": image.key[:12],
                "repo_state": facts,
                "before_passed": sum(v == "PASSED" for v in before.values()),
                "before_failed": sum(v in ("FAILED", "ERROR") for v in before.values()),
                "after_passed": sum(v == "PASSED" for v in after.values()),
                "after_failed": sum(v in ("FAILED", "ERROR") for v in after.values()),
                "ok": not problems,
                "problems": problems[:10],
                "seconds": round(time.monotonic() - started, 1),
            }
            print(f"{iid}: {'ok' if not problems else problems[:3]} ({report[iid]['seconds']}s)", flush=True)
    path = OUT / "image_validation.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**old, **report}, indent=1, sort_keys=True) + "\n")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    asyncio.run(main())
