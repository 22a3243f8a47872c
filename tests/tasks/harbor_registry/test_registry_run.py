"""`ares run harbor --dataset NAME@VERSION --registry FILE` as a user runs it: a real subprocess, real git,
real sandboxes; the oracle scores 1 only on the pinned commits, and a second run needs no repository."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from harbor_repos import dataset, entry, task_repo, write_registry


def ares(*args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("ares", path=str(Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "ares.cli.main"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=300)


def _rewards(out: Path) -> dict[str, float]:
    episodes = [json.loads(p.read_text()) for p in (out / "episodes").glob("*.json")]
    return {e["task_id"]: e["reward"] for e in episodes}


def test_oracle_run_of_a_registry_dataset_then_from_the_cache_alone(tmp_path: Path) -> None:
    repo = task_repo(tmp_path / "repo", {"tasks/hello-file": "hello-file", "datasets/x/fix-bug": "fix-bug"})
    later = [entry("hello", repo.url, repo.head, "tasks/hello-file")]  # the broken branch head
    pinned = [
        entry("hello", repo.url, repo.pinned, "tasks/hello-file"),
        entry("fix-bug", repo.url, repo.pinned, "datasets/x/fix-bug"),
    ]
    registry = write_registry(
        tmp_path / "registry.json", [dataset("demo", "1.0", pinned, "pinned"), dataset("demo", "1.1", later)]
    )
    first = ares("run", "harbor", "--dataset", "demo@1.0", "--registry", str(registry), "-p", "oracle",
                 "--out", str(tmp_path / "one"))  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert _rewards(tmp_path / "one") == {"hello": 1.0, "fix-bug": 1.0}

    shutil.rmtree(repo.path)  # the cache alone: no fetch can happen now
    again = ares("run", "harbor-tools", "--dataset", "demo@1.0", "--registry", str(registry), "-p", "oracle",
                 "--out", str(tmp_path / "two"))  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert _rewards(tmp_path / "two") == {"hello": 1.0, "fix-bug": 1.0}

    gone = ares("run", "harbor", "--dataset", "demo@1.1", "--registry", str(registry), "--out", str(tmp_path))
    assert gone.returncode == 2
    assert gone.stderr.startswith(f"error: cannot fetch {repo.url} at {repo.head}")


def test_dataset_name_mistakes_are_one_line_errors(tmp_path: Path) -> None:
    repo = task_repo(tmp_path / "repo", {"t": "hello-file"})
    tasks = [entry("t", repo.url, repo.pinned, "t")]
    versions = [dataset("demo", "1.0", tasks), dataset("demo", "2.0", tasks)]
    registry = str(write_registry(tmp_path / "r.json", versions))
    cases = {
        ("--dataset", "dmeo@1.0", "--registry", registry): "error: no dataset 'dmeo' in the registry "
        f"{registry}; did you mean demo?",
        ("--dataset", "demo@3", "--registry", registry): "error: dataset 'demo' has no version '3'; "
        "versions: 1.0, 2.0",
        ("--dataset", "demo@1.0", "--path", str(tmp_path)): "error: --path and --dataset are alternatives",
        ("--registry", registry): "error: --registry goes with --dataset NAME@VERSION",
        ("--dataset", "@1.0"): "error: --dataset '@1.0': give a dataset name",
    }
    for args, message in cases.items():
        result = ares("run", "harbor", *args, "--out", str(tmp_path / "out"))
        first_line = result.stderr.strip().splitlines()[0]
        assert (result.returncode, first_line[: len(message)]) == (2, message), args


def test_datasets_list_shows_each_dataset_of_a_registry(tmp_path: Path) -> None:
    sha = "a" * 40
    tasks = [entry(f"t{i}", "https://example.com/r.git", sha, f"t{i}") for i in range(3)]
    registry = write_registry(
        tmp_path / "r.json", [dataset("demo", "1.0", tasks, "three tasks"), dataset("other", "head", [])]
    )
    result = ares("datasets", "list", "--registry", str(registry))
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if "demo@1.0" in line or "other@head" in line]
    assert len(rows) == 2 and "3" in rows[0] and "three tasks" in rows[0]
    missing = ares("datasets", "list", "--registry", str(tmp_path / "none.json"))
    assert (missing.returncode, missing.stderr.split(":")[0]) == (2, "error")
