"""Registry files: Harbor's format parsed, names resolved, hostile task entries refused before git runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harbor_repos import dataset, entry, http_served, write_registry

from ares.tasks.harbor_registry import DatasetError, Registry, read_registry, resolve, source
from ares.tasks.harbor_registry.model import parse_registry

SHA = "0123456789abcdef0123456789abcdef01234567"
URL = "https://github.com/example/tasks.git"


def _registry(*datasets: dict[str, Any], remote: bool = False) -> Registry:
    return parse_registry(json.dumps(list(datasets)), "reg.json", remote=remote)


def _one(name: str = "demo", version: str = "1.0", **task: Any) -> dict[str, Any]:
    fields = {"name": "t1", "url": URL, "commit": SHA, "path": "tasks/t1"} | task
    return dataset(name, version, [entry(fields["name"], fields["url"], fields["commit"], fields["path"])])


def test_harbor_format_parses_and_resolves_by_name_and_version() -> None:
    registry = _registry(_one(version="1.0"), _one(version="2.0", path="b"), _one(name="other"))
    chosen = resolve(registry, "demo@1.0")
    assert (chosen.label, chosen.tasks()[0].path, chosen.tasks()[0].commit) == ("demo@1.0", "tasks/t1", SHA)
    assert resolve(registry, "demo").version == "2.0"  # the newest numeric version
    assert resolve(registry, "other").version == "1.0"  # the only one
    assert resolve(registry, "demo@2.0").tasks()[0].path == "b"


def test_commit_ids_are_lowercased_and_paths_normalized() -> None:
    [task] = resolve(_registry(_one(commit=SHA.upper(), path="./tasks//t1/")), "demo").tasks()
    assert (task.commit, task.path) == (SHA, "tasks/t1")
    assert resolve(_registry(_one(path=".")), "demo").tasks()[0].path == "."
    odd = "adapters/swe_bench/django__django-11099@v1,+=x"
    assert resolve(_registry(_one(path=odd)), "demo").tasks()[0].path == odd


def test_unknown_dataset_names_the_close_ones() -> None:
    registry = _registry(_one(name="terminal-bench"), _one(name="swebench-verified"))
    with pytest.raises(DatasetError, match=r"no dataset 'terminal-bnech'.*did you mean terminal-bench"):
        resolve(registry, "terminal-bnech@2.0")
    with pytest.raises(DatasetError, match=r"it has 2: swebench-verified, terminal-bench"):
        resolve(registry, "zzz")


def test_unknown_version_lists_the_versions() -> None:
    registry = _registry(_one(version="1.0"), _one(version="2.0"))
    with pytest.raises(DatasetError, match=r"no version '3.0'; versions: 1.0, 2.0"):
        resolve(registry, "demo@3.0")


def test_a_name_with_non_numeric_versions_is_ambiguous() -> None:
    registry = _registry(_one(version="1.0"), _one(version="parity"))
    with pytest.raises(DatasetError, match=r"several versions \(1.0, parity\); name one"):
        resolve(registry, "demo")


def test_duplicate_datasets_and_tasks_are_errors() -> None:
    with pytest.raises(DatasetError, match=r"lists demo@1\.0 2 times"):
        resolve(_registry(_one(), _one()), "demo@1.0")
    twice = dataset("demo", "1.0", [entry("t", URL, SHA, "a"), entry("t", URL, SHA, "b")])
    with pytest.raises(DatasetError, match="lists task 't' twice"):
        resolve(_registry(twice), "demo").tasks()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "is not valid JSON"),
        ('{"datasets": []}', "must be a JSON list of datasets"),
        ('[{"name": "d", "version": 2.0, "tasks": []}]', r"'version' must be a non-empty string.*quote it"),
        ('[{"name": "a@b", "version": "1", "tasks": []}]', "without '@'"),
        ('[{"name": "d", "version": "1", "tasks": "x"}]', "'tasks' must be a list"),
    ],
)
def test_malformed_registries_are_refused(text: str, message: str) -> None:
    with pytest.raises(DatasetError, match=message):
        parse_registry(text, "reg.json", remote=False)


def test_a_bad_entry_in_another_dataset_does_not_block_this_one() -> None:
    registry = _registry(_one(name="broken", commit="main"), _one(name="good"))
    assert resolve(registry, "good").tasks()[0].name == "t1"
    with pytest.raises(DatasetError, match=r"dataset broken@1\.0 in reg\.json, task 't1'"):
        resolve(registry, "broken").tasks()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("commit", "main", "must be a full commit id"),
        ("commit", "HEAD", "must be a full commit id"),
        ("commit", "head", "'head' or a short id is not accepted"),
        ("commit", SHA[:12], "must be a full commit id"),
        ("commit", SHA[:-1] + "g", "must be a full commit id"),
        ("commit", None, "must be a full commit id"),
        ("commit", f"{SHA} --upload-pack=x", "must be a full commit id"),
        ("path", "../outside", r"leaves the repository \('..' is not allowed\)"),
        ("path", "tasks/../../outside", "leaves the repository"),
        ("path", "/etc", "must be relative"),
        ("path", "tasks\\t1", "must be relative to the repository's root, with '/'"),
        ("path", ".git/hooks", "has the component '.git'"),
        ("path", "tasks/.GIT", "has the component '.GIT'"),
        ("path", "tasks/*", "has the component '\\*'"),
        ("path", "tasks/!t1", "must be plain names"),
        ("path", "-rf", "must be plain names"),
        ("path", "", "'path' must be a non-empty string"),
        ("url", "ext::sh -c touch% /tmp/pwned", "names a git remote helper"),
        ("url", "https://h/r has space", "has spaces"),
        ("url", "ext::sh", r"names a git remote helper \('ext::'\), which can run commands"),
        ("url", "fd::17", "remote helper"),
        ("url", "-uhack", "leading '-'"),
        ("url", "ssh://-oProxyCommand=x/repo", "host name starting with '-'"),
        ("url", "ftp://example.com/repo.git", "is not allowed"),
        ("url", "repo-next-to-registry", "is not allowed"),
        ("url", None, "tasks without a git repository are local directories"),
        ("url", "https://exa\nmple.com/r", "control characters"),
    ],
)
def test_hostile_task_entries_are_refused(field: str, value: Any, message: str) -> None:
    with pytest.raises(DatasetError, match=message):
        resolve(_registry(_one(**{field: value})), "demo").tasks()


@pytest.mark.parametrize(
    "url", ["https://h/r.git", "http://h/r", "ssh://git@h/r.git", "git://h/r", "git@github.com:o/r.git"]
)
def test_network_transports_are_allowed(url: str) -> None:
    assert resolve(_registry(_one(url=url), remote=True), "demo").tasks()[0].git_url == url


@pytest.mark.parametrize("url", ["file:///srv/repo", "/srv/repo"])
def test_local_repositories_only_from_a_local_registry(url: str) -> None:
    assert resolve(_registry(_one(url=url)), "demo").tasks()[0].git_url == url
    with pytest.raises(DatasetError, match="a registry read from the network may not name repositories"):
        resolve(_registry(_one(url=url), remote=True), "demo").tasks()


def test_registry_from_url_is_saved_and_used_when_the_server_is_gone(tmp_path: Path) -> None:
    served = tmp_path / "www"
    served.mkdir()
    write_registry(served / "registry.json", [_one(url="https://example.com/r.git")])
    saved = tmp_path / "saved"
    with http_served(served) as base:
        url = f"{base}/registry.json"
        assert resolve(read_registry(url, saved), "demo").remote
    source._FETCHED.clear()  # a new process: only the saved copy is left
    assert resolve(read_registry(url, saved), "demo").tasks()[0].git_url == "https://example.com/r.git"
    source._FETCHED.clear()
    with pytest.raises(DatasetError, match=r"cannot fetch the registry .*pass --registry FILE"):
        read_registry(url, tmp_path / "nothing-saved")


def test_registry_location_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_registry(tmp_path / "r.json", [_one()])
    monkeypatch.setenv("ARES_HARBOR_REGISTRY", str(path))
    assert read_registry(None, tmp_path).origin == str(path)
    assert read_registry(path.as_uri(), tmp_path).origin == str(path)
    with pytest.raises(DatasetError, match="does not exist"):
        read_registry(tmp_path / "missing.json", tmp_path)
