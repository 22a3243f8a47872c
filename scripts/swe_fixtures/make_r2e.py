"""Generate R2E-Gym-shaped fixture instances (tests/fixtures/swe/r2e/) from the SWE fixtures.

For a few instances of tests/fixtures/swe/instances.jsonl: the repository at base_commit (from the
project's git bundle), the gold fix committed on top (its hash is R2E-Gym's ``commit_hash``), the
hidden test file as the test_patch leaves it (plus the conftest.py of its directory) as R2E-Gym's
generated tests ``r2e_tests/test_1.py``, and ``expected_output_json`` from a real ``pytest -rA`` run
of those tests on the fixed repository, parsed with R2E-Gym's rule. The buggy run must differ.

    python scripts/swe_fixtures/make_r2e.py [--work /tmp/swe-r2e]

Writes tests/fixtures/swe/r2e/{instances.jsonl, images/<name>/{Dockerfile, run_tests.sh, r2e_tests/}}.
The images start FROM the project images (build those first, see tests/fixtures/swe/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from ares.tasks.swe.r2e import parse_log  # noqa: E402

SWE = ROOT / "tests" / "fixtures" / "swe"
OUT = SWE / "r2e"
CHOSEN = {
    "pytoolz__toolz-90001": ("toolz", "1.2.0"),
    "python-poetry__tomlkit-90004": ("tomlkit", "0.15.2"),
    "mahmoud__boltons-90001": ("boltons", "26.2.0"),
}
GIT_ENV = {
    "GIT_AUTHOR_NAME": "ARES fixtures", "GIT_AUTHOR_EMAIL": "fixtures@ares.invalid",
    "GIT_COMMITTER_NAME": "ARES fixtures", "GIT_COMMITTER_EMAIL": "fixtures@ares.invalid",
    "GIT_AUTHOR_DATE": "2026-01-02T00:00:00+0000", "GIT_COMMITTER_DATE": "2026-01-02T00:00:00+0000",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
}  # fmt: skip
RUN_TESTS = "python -W ignore -m pytest -rA -p no:cacheprovider r2e_tests\n"


def git(repo: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repo, input=stdin, capture_output=True, text=True, env={**os.environ, **GIT_ENV}
    )
    if done.returncode:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr}")
    return done.stdout


def changed_files(patch: str) -> list[str]:
    return [line[6:] for line in patch.splitlines() if line.startswith("+++ b/")]


def run_hidden(repo: Path, tests: dict[str, str]) -> dict[str, str]:
    target = repo / "r2e_tests"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir()
    for name, code in tests.items():
        (target / name).write_text(code)
    cmd = [sys.executable, "-W", "ignore", "-m", "pytest", "-rA", "-p", "no:cacheprovider", "r2e_tests"]
    env = {**os.environ, "PYTHONPATH": str(repo), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    log = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, env=env, timeout=600).stdout
    shutil.rmtree(target)
    return parse_log(log)


def make(row: dict, project: str, version: str, work: Path) -> dict:
    iid, base = row["instance_id"], row["base_commit"]
    repo = work / iid
    shutil.rmtree(repo, ignore_errors=True)
    subprocess.run(
        ["git", "clone", "-q", str(SWE / "images" / project / f"{project}.bundle"), str(repo)], check=True
    )
    git(repo, "checkout", "-q", "--detach", base)
    git(repo, "apply", "-", stdin=row["test_patch"])
    (test_file,) = changed_files(row["test_patch"])
    tests = {"test_1.py": (repo / test_file).read_text()}
    conftest = (repo / test_file).parent / "conftest.py"
    if conftest.is_file():
        tests["conftest.py"] = conftest.read_text()
    git(repo, "checkout", "-q", "-f", base)
    buggy = run_hidden(repo, tests)
    old = {path: (repo / path).read_text() for path in changed_files(row["patch"])}
    git(repo, "apply", "-", stdin=row["patch"])
    expected = run_hidden(repo, tests)
    if not expected or expected == buggy:
        raise RuntimeError(f"{iid}: expected {expected} vs buggy {buggy}")
    git(repo, "apply", "-", stdin=row["test_patch"])
    git(repo, "commit", "-q", "-a", "--no-verify", "-m", f"Fix {iid}")
    commit = git(repo, "rev-parse", "HEAD").strip()
    diffs = [
        {
            "header": {"file": {"path": path}, "misc_line": None},
            "old_file_content": old.get(path, git(repo, "show", f"{base}:{path}")),
            "new_file_content": (repo / path).read_text(),
            "hunks": [],
        }
        for path in [*changed_files(row["patch"]), test_file]
    ]
    name = f"{project}-{row['instance_id'].rsplit('-', 1)[1]}"
    image_dir = OUT / "images" / name
    shutil.rmtree(image_dir, ignore_errors=True)
    (image_dir / "r2e_tests").mkdir(parents=True)
    for file, code in tests.items():
        (image_dir / "r2e_tests" / file).write_text(code)
    (image_dir / "run_tests.sh").write_text(RUN_TESTS)
    (image_dir / "Dockerfile").write_text(
        f"# R2E-Gym's layout for {iid}: /testbed at the buggy commit, the generated tests in /r2e_tests,\n"
        f"# the test command in /testbed/run_tests.sh. Build ../../../images/{project} first.\n"
        f"FROM ares-swe/{project}:{version}\n"
        "COPY r2e_tests /r2e_tests\nCOPY run_tests.sh /testbed/run_tests.sh\n"
        f"RUN cd /testbed && git checkout -q --detach {base}\nWORKDIR /testbed\n"
    )
    return {
        "repo_name": project,
        "docker_image": f"ares-swe-r2e/{name}:1",
        "commit_hash": commit,
        "parsed_commit_content": json.dumps(
            {
                "old_commit_hash": base,
                "new_commit_hash": commit,
                "commit_message": f"Fix {iid}",
                "file_diffs": diffs,
            }
        ),
        "execution_result_content": json.dumps(execution_result(project, commit, tests)),
        "modified_files": changed_files(row["patch"]),
        "relevant_files": [],
        "num_non_test_files": 1,
        "problem_statement": row["problem_statement"],
        "expected_output_json": json.dumps(expected, sort_keys=True),
    }


def execution_result(project: str, commit: str, tests: dict[str, str]) -> dict:
    """R2E-Gym's ExecutionResult fields the loader reads (the generated tests), and the setup ones."""
    return {
        "repo_name": project,
        "new_commit_hash": commit,
        "test_file_codes": list(tests.values()),
        "test_file_names": list(tests),
        "setup_res_code": 0,
        "setup_res_stdout": "",
        "setup_res_stderr": "",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=Path("/tmp/swe-r2e"))
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    rows = {json.loads(line)["instance_id"]: json.loads(line) for line in (SWE / "instances.jsonl").open()}
    out = [make(rows[iid], *project, args.work) for iid, project in CHOSEN.items()]
    (OUT / "instances.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in out))
    for row in out:
        print(
            row["repo_name"], row["commit_hash"][:12], len(json.loads(row["expected_output_json"])), "tests"
        )


if __name__ == "__main__":
    main()
