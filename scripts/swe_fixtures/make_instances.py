"""Generate the SWE-bench-format fixture instances in tests/fixtures/swe/ from PyPI sdists.

For each project in ``regressions.PROJECTS``: download the release's sdist with pip, and for each
hand-written regression make one root commit (the release with the bug applied; fixed author, committer,
date and message, so ``base_commit`` is the same on every run). The fix is ``patch``, the new test is
``test_patch``; FAIL_TO_PASS and PASS_TO_PASS come from real ``pytest -rA`` runs in a venv per project
(before: base + test_patch; after: base + test_patch + patch).

    python scripts/swe_fixtures/make_instances.py [--work /tmp/swe-fixtures] [--only toolz,click]

Writes tests/fixtures/swe/{instances.jsonl, instances_5x.jsonl, instances_swegym.jsonl, specs.json,
validation.json, repos/<project>.bundle, images/<project>/Dockerfile, images/instances/<id>/Dockerfile}.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from regressions import PROJECTS, REGRESSIONS, Project, Regression

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "swe"
DATE = "2026-01-01T00:00:00+0000"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "ARES fixtures",
    "GIT_AUTHOR_EMAIL": "fixtures@ares.invalid",
    "GIT_COMMITTER_NAME": "ARES fixtures",
    "GIT_COMMITTER_EMAIL": "fixtures@ares.invalid",
    "GIT_AUTHOR_DATE": DATE,
    "GIT_COMMITTER_DATE": DATE,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}
GIT_OPTS = ["-c", "core.autocrlf=false", "-c", "core.filemode=true", "-c", "commit.gpgsign=false"]
TEST_TIMEOUT = 600
# 5.x-style and SWE-Gym-style files carry a few instances each (the 4.x file carries all).
FIVE_X = {"toolz": 2, "tomlkit": 1, "marshmallow": 1, "boltons": 1, "click": 1}
SWEGYM = {"toolz": 1, "tomlkit": 1, "marshmallow": 1, "boltons": 1, "click": 1}


def run(cmd: list[str], cwd: Path | None = None, check: bool = True, timeout: float | None = None) -> str:
    env = {**os.environ, **GIT_ENV}
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def git(repo: Path, *args: str) -> str:
    return run(["git", *GIT_OPTS, *args], cwd=repo)


def instance_id(reg: Regression) -> str:
    owner, name = PROJECTS[reg.project].repo.split("/")
    return f"{owner}__{name}-{reg.number}"


def short_version(project: Project) -> str:
    return ".".join(project.version.split(".")[:2])


def sdist(project: Project, work: Path) -> Path:
    dest = work / "sdists"
    dest.mkdir(parents=True, exist_ok=True)
    found = sorted(dest.glob(f"{project.name}-{project.version}.tar.gz"))
    if not found:
        run(
            [
                *(sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:"),
                *(f"{project.name}=={project.version}", "-d", str(dest)),
            ]
        )
        found = sorted(dest.glob(f"{project.name}-{project.version}.tar.gz"))
    return found[0]


def unpack(archive: Path, dest: Path) -> None:
    """Unpack the sdist's single top directory into ``dest`` (replacing its content, keeping .git)."""
    for child in dest.iterdir():
        if child.name != ".git":
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    tmp = dest.parent / (dest.name + ".unpack")
    shutil.rmtree(tmp, ignore_errors=True)
    with tarfile.open(archive) as tar:
        tar.extractall(tmp, filter="tar")
    (top,) = list(tmp.iterdir())
    for child in top.iterdir():
        shutil.move(str(child), dest / child.name)
    shutil.rmtree(tmp)


def replace_once(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    if text.count(old) != 1:
        raise RuntimeError(f"{path}: expected exactly one occurrence of {old!r}, found {text.count(old)}")
    path.write_text(text.replace(old, new))


def build_repo(project: Project, regs: list[Regression], work: Path) -> tuple[Path, dict[str, str]]:
    """One orphan root commit per regression (the release with that bug); returns the repo and commits."""
    archive = sdist(project, work)
    repo = work / "repos" / project.name
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "release")
    commits: dict[str, str] = {}
    for reg in regs:
        iid = instance_id(reg)
        git(repo, "checkout", "-q", "--orphan", iid)
        unpack(archive, repo)
        replace_once(repo / reg.file, reg.old, reg.new)
        git(repo, "add", "-A", "-f", ".")
        git(repo, "commit", "-q", "--no-verify", "-m", f"{project.name} {project.version} ({iid})")
        commits[iid] = git(repo, "rev-parse", "HEAD").strip()
    return repo, commits


def make_patches(repo: Path, reg: Regression, base: str) -> tuple[str, str]:
    git(repo, "checkout", "-q", "-f", base)
    replace_once(repo / reg.file, reg.new, reg.old)
    patch = git(repo, "diff", "--no-color", "--no-ext-diff")
    git(repo, "checkout", "-q", "-f", base)
    test_path = repo / reg.test_file
    text = test_path.read_text()
    test_path.write_text(text + ("" if text.endswith("\n") else "\n") + reg.test)
    test_patch = git(repo, "diff", "--no-color", "--no-ext-diff")
    git(repo, "checkout", "-q", "-f", base)
    return patch, test_patch


def parse_pytest(log: str) -> dict[str, str]:
    """The SWE-bench pytest log parser's rule: ``STATUS test_id`` lines of the -rA summary."""
    statuses = ("PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL", "XPASS")
    result: dict[str, str] = {}
    for line in log.splitlines():
        if any(line.startswith(s) for s in statuses):
            if line.startswith("FAILED"):
                line = line.replace(" - ", " ")
            parts = line.split()
            if len(parts) > 1:
                result[parts[1]] = parts[0]
    return result


def venv_for(project: Project, work: Path, checkout: Path) -> Path:
    venv = work / "venvs" / project.name
    py = venv / "bin" / "python"
    if not py.exists():
        run([sys.executable, "-m", "venv", str(venv)])
        run([str(py), "-m", "pip", "install", "-q", *project.test_deps])
    run([str(py), "-m", "pip", "install", "-q", "--no-deps", "-e", str(checkout)])
    return py


def run_tests(py: Path, checkout: Path, files: list[str]) -> tuple[dict[str, str], str]:
    cmd = [str(py), "-m", "pytest", "-rA", "-p", "no:cacheprovider", *files]
    proc = subprocess.run(cmd, cwd=checkout, capture_output=True, text=True, timeout=TEST_TIMEOUT)
    return parse_pytest(proc.stdout), proc.stdout


def ambiguous_ids(py: Path, checkout: Path, files: list[str]) -> set[str]:
    """Test ids the log parser cuts at a space (parametrize ids with spaces): kept out of F2P/P2P."""
    cmd = [str(py), "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *files]
    proc = subprocess.run(cmd, cwd=checkout, capture_output=True, text=True, timeout=TEST_TIMEOUT)
    return {line.split()[0] for line in proc.stdout.splitlines() if "::" in line and len(line.split()) > 1}


def eval_script(base: str, test_files: list[str], test_patch: str) -> str:
    files = " ".join(test_files)
    return (
        "#!/bin/bash\nset -uxo pipefail\ncd /testbed\n"
        f"git checkout {base} {files}\n"
        "git apply -v - <<'EOF_114329324912'\n"
        f"{test_patch}EOF_114329324912\n"
        ": '>>>>> Start Test Output'\n"
        f"pytest -rA {files}\n"
        ": '>>>>> End Test Output'\n"
        f"git checkout {base} {files}\n"
    )


def project_dockerfile(project: Project, first_ref: str) -> str:
    deps = " ".join(project.test_deps)
    return f"""# {project.repo} {project.version}: every instance's base_commit (one root commit each) under
# refs/heads/<instance_id>, installed editable at /testbed with its test dependencies.
# ares images build tests/fixtures/swe/images/{project.name} -t ares-swe/{project.name}:{project.version}
FROM ares/host-python
COPY {project.name}.bundle /tmp/{project.name}.bundle
RUN git init -q /testbed \\
 && git -C /testbed fetch -q /tmp/{project.name}.bundle 'refs/heads/*:refs/heads/*' \\
 && git -C /testbed checkout -q {first_ref} \\
 && rm -f /tmp/{project.name}.bundle
RUN python -m pip install -q {deps} && python -m pip install -q -e /testbed
WORKDIR /testbed
"""


def instance_dockerfile(project: Project, base: str) -> str:
    return f"""# One instance: /testbed at base_commit {base}, no other commits or refs.
# Build the project image (../../{project.name}) first, tagged ares-swe/{project.name}:{project.version}.
FROM ares-swe/{project.name}:{project.version}
RUN cd /testbed && git checkout -q --detach {base} \\
 && git for-each-ref --format='%(refname)' | xargs -r -n1 git update-ref -d \\
 && git reflog expire --expire=now --all && git gc -q --prune=now
WORKDIR /testbed
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=Path("/tmp/swe-fixtures"))
    ap.add_argument("--only", default="", help="comma-separated projects (default: all)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    only = [p for p in args.only.split(",") if p] or list(PROJECTS)
    out: Path = args.out
    work: Path = args.work
    work.mkdir(parents=True, exist_ok=True)
    for sub in ("repos", "images/instances"):
        (out / sub).mkdir(parents=True, exist_ok=True)

    records: dict[str, dict] = {}
    inst_path = out / "instances.jsonl"
    if inst_path.exists():
        for line in inst_path.read_text().splitlines():
            row = json.loads(line)
            if row["instance_id"].split("__")[1].split("-")[0] not in only:
                records[row["instance_id"]] = row
    validation: dict[str, dict] = {}
    val_path = out / "validation.json"
    if val_path.exists():
        validation = {k: v for k, v in json.loads(val_path.read_text()).items() if k in records}
    specs: dict[str, dict] = {}

    for name in only:
        project = PROJECTS[name]
        regs = [r for r in REGRESSIONS if r.project == name]
        repo, commits = build_repo(project, regs, work)
        idir = out / "images" / name
        idir.mkdir(parents=True, exist_ok=True)
        bundle = idir / f"{name}.bundle"
        bundle.unlink(missing_ok=True)
        git(repo, "bundle", "create", "-q", str(bundle), *[instance_id(r) for r in regs])
        link = out / "repos" / f"{name}.bundle"
        link.unlink(missing_ok=True)
        link.symlink_to(Path("..") / "images" / name / f"{name}.bundle")
        checkout = work / "checkouts" / name
        shutil.rmtree(checkout, ignore_errors=True)
        run(["git", "clone", "-q", "--no-checkout", str(repo), str(checkout)])
        first = commits[instance_id(regs[0])]
        git(checkout, "checkout", "-q", "--detach", first)
        py = venv_for(project, work, checkout)
        (idir / "Dockerfile").write_text(project_dockerfile(project, instance_id(regs[0])))
        specs[project.repo] = {
            short_version(project): {
                "python": "3.11",
                "pre_install": [],
                "install": "python -m pip install -e .",
                "test_deps": list(project.test_deps),
                "test_cmd": "pytest -rA",
                "log_parser": "pytest",
                "image": f"ares-swe/{name}:{project.version}",
                "dockerfile": f"images/{name}/Dockerfile",
            }
        }
        for reg in regs:
            iid = instance_id(reg)
            base = commits[iid]
            patch, test_patch = make_patches(checkout, reg, base)
            files = [reg.test_file]
            started = time.monotonic()
            git(checkout, "checkout", "-q", "-f", base)
            subprocess.run(["git", "apply", "-"], cwd=checkout, input=test_patch, text=True, check=True)
            before, _ = run_tests(py, checkout, files)
            subprocess.run(["git", "apply", "-"], cwd=checkout, input=patch, text=True, check=True)
            after, log_after = run_tests(py, checkout, files)
            for test in ambiguous_ids(py, checkout, files):
                before.pop(test, None)
                after.pop(test, None)
            git(checkout, "checkout", "-q", "-f", base)
            f2p = sorted(
                t for t, s in after.items() if s == "PASSED" and before.get(t) in ("FAILED", "ERROR")
            )
            p2p = sorted(t for t, s in after.items() if s == "PASSED" and before.get(t) == "PASSED")
            broken_after = sorted(t for t, s in after.items() if s in ("FAILED", "ERROR"))
            if not f2p or broken_after:
                tail = "\n".join(log_after.splitlines()[-30:])
                raise RuntimeError(f"{iid}: F2P={f2p} failing after the fix: {broken_after}\n{tail}")
            records[iid] = {
                "repo": project.repo,
                "instance_id": iid,
                "base_commit": base,
                "patch": patch,
                "test_patch": test_patch,
                "problem_statement": reg.problem_statement,
                "hints_text": "",
                "created_at": "2026-01-01T00:00:00Z",
                "version": short_version(project),
                "FAIL_TO_PASS": json.dumps(f2p),
                "PASS_TO_PASS": json.dumps(p2p),
                "environment_setup_commit": base,
            }
            summary = lambda st: {k: sum(1 for v in st.values() if v == k) for k in sorted(set(st.values()))}  # noqa: E731
            validation[iid] = {
                "test_files": files,
                "before": summary(before),
                "after": summary(after),
                "FAIL_TO_PASS": len(f2p),
                "PASS_TO_PASS": len(p2p),
                "seconds": round(time.monotonic() - started, 2),
            }
            (out / "images" / "instances" / iid).mkdir(parents=True, exist_ok=True)
            (out / "images" / "instances" / iid / "Dockerfile").write_text(instance_dockerfile(project, base))
            print(f"{iid}: base {base[:12]} F2P {len(f2p)} P2P {len(p2p)}", flush=True)

    ordered = [records[k] for k in sorted(records)]
    inst_path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in ordered))
    val_path.write_text(
        json.dumps({k: validation[k] for k in sorted(validation)}, indent=1, sort_keys=True) + "\n"
    )
    write_other_shapes(out, ordered)
    spec_path = out / "specs.json"
    old_specs = json.loads(spec_path.read_text()) if spec_path.exists() else {}
    spec_path.write_text(json.dumps({**old_specs, **specs}, indent=1, sort_keys=True) + "\n")


def write_other_shapes(out: Path, rows: list[dict]) -> None:
    """A few instances in the SWE-bench 5.x shape (image, eval_script, log_parser) and SWE-Gym's (lists)."""
    five, gym = [], []
    taken5: dict[str, int] = {}
    takeng: dict[str, int] = {}
    for row in rows:
        name = row["repo"].split("/")[1]
        project = PROJECTS[name]
        test_files = sorted(
            {line[len("+++ b/") :] for line in row["test_patch"].splitlines() if line.startswith("+++ b/")}
        )
        if taken5.get(name, 0) < FIVE_X[name]:
            taken5[name] = taken5.get(name, 0) + 1
            five.append(
                {
                    **row,
                    "image": f"ares-swe/{name}.{row['instance_id'].rsplit('-', 1)[1]}:{project.version}",
                    "eval_script": eval_script(row["base_commit"], test_files, row["test_patch"]),
                    "log_parser": "pytest",
                }
            )
        if takeng.get(name, 0) < SWEGYM[name]:
            takeng[name] = takeng.get(name, 0) + 1
            gym.append(
                {
                    **row,
                    "FAIL_TO_PASS": json.loads(row["FAIL_TO_PASS"]),
                    "PASS_TO_PASS": json.loads(row["PASS_TO_PASS"]),
                }
            )
    (out / "instances_5x.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in five))
    (out / "instances_swegym.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in gym))


if __name__ == "__main__":
    main()
