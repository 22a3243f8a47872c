"""A Harbor registry (``registry.json``) as checked values: datasets by name and version, and tasks
pinned to a git repository, a commit and a directory inside it.

The file is a JSON list of datasets, each ``{"name", "version", "description", "tasks": [{"name",
"git_url", "git_commit_id", "path"}, ...]}`` (unknown keys such as ``metrics`` are ignored, as Harbor
adds them over time). A registry may come from anyone, so every task entry is checked before git
sees it: the commit must be a full hex object id (a branch name would make the dataset a moving
target), the path must stay inside the repository, and the URL must use a transport that cannot run
commands (``ext::`` and other remote helpers can). The datasets' tasks are checked only when one is
chosen, so a malformed entry elsewhere in a large public registry does not block the others.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ares.errors import TaskError


class DatasetError(TaskError):
    """A registry, a dataset name or a registry task cannot be used (the message says why)."""


#: URL schemes git may use for a registry task (also given to git as GIT_ALLOW_PROTOCOL): none of
#: them runs a command on this machine. Local ones (``file``) only from a registry on this machine.
NETWORK_SCHEMES = ("https", "http", "ssh", "git")
LOCAL_SCHEMES = ("file",)
_SSH_ALIASES = {"git+ssh": "ssh", "ssh+git": "ssh"}
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
#: Characters of a task path's components: plain names only, so a path is never read as a pattern
#: (git's sparse-checkout patterns give ``*``, ``?``, ``[``, ``!`` and ``#`` a meaning).
_PATH_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+=@,-]*")
_SCP_LIKE = re.compile(r"[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^/]")
_HELPER = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*::")


@dataclass(frozen=True, slots=True)
class RegistryTask:
    """One task of a dataset: the directory ``path`` of repository ``git_url`` at ``commit``."""

    name: str
    git_url: str
    commit: str
    #: Relative POSIX path inside the repository, normalized; "." is the repository's root.
    path: str


@dataclass(frozen=True, slots=True)
class RegistryDataset:
    name: str
    version: str
    description: str
    #: The raw task entries, checked by ``tasks()`` when the dataset is used.
    raw_tasks: tuple[Any, ...]
    #: Where the registry came from (a path or URL), for messages.
    origin: str
    #: True when the registry was read from the network: its tasks may then not name local repositories.
    remote: bool

    @property
    def label(self) -> str:
        return f"{self.name}@{self.version}"

    def tasks(self) -> list[RegistryTask]:
        """The dataset's tasks, each checked; a bad entry is an error naming the dataset, task and field."""
        if not self.raw_tasks:
            raise DatasetError(f"dataset {self.label} in {self.origin} has no tasks")
        tasks = [self._task(index, raw) for index, raw in enumerate(self.raw_tasks)]
        seen: set[str] = set()
        for task in tasks:
            if task.name in seen:
                raise DatasetError(f"dataset {self.label} in {self.origin} lists task {task.name!r} twice")
            seen.add(task.name)
        return tasks

    def _task(self, index: int, raw: Any) -> RegistryTask:
        where = f"dataset {self.label} in {self.origin}, task {index}"
        if not isinstance(raw, Mapping):
            raise DatasetError(f"{where} is not a JSON object ({type(raw).__name__})")
        name = raw.get("name")
        if not isinstance(name, str) or not name.strip() or not name.isprintable():
            raise DatasetError(f"{where}: 'name' must be a non-empty printable string, got {name!r}")
        where = f"dataset {self.label} in {self.origin}, task {name!r}"
        return RegistryTask(
            name=name,
            git_url=check_git_url(raw.get("git_url"), where, remote=self.remote),
            commit=check_commit(raw.get("git_commit_id"), where),
            path=check_task_path(raw.get("path"), where),
        )


@dataclass(frozen=True, slots=True)
class Registry:
    origin: str
    datasets: tuple[RegistryDataset, ...]

    def versions(self, name: str) -> list[str]:
        return [d.version for d in self.datasets if d.name == name]

    def names(self) -> list[str]:
        return list(dict.fromkeys(d.name for d in self.datasets))


def parse_registry(text: str, origin: str, *, remote: bool) -> Registry:
    """Parse a registry file's text: a JSON list of datasets with string ``name`` and ``version``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"registry {origin} is not valid JSON: {exc}") from None
    if not isinstance(data, list):
        raise DatasetError(
            f"registry {origin} must be a JSON list of datasets (Harbor's registry.json format), "
            f"got a JSON {type(data).__name__}"
        )
    return Registry(origin, tuple(_dataset(index, raw, origin, remote) for index, raw in enumerate(data)))


def _dataset(index: int, raw: Any, origin: str, remote: bool) -> RegistryDataset:
    where = f"registry {origin}, dataset {index}"
    if not isinstance(raw, Mapping):
        raise DatasetError(f"{where} is not a JSON object ({type(raw).__name__})")
    for key in ("name", "version"):
        value = raw.get(key)
        if not isinstance(value, str) or not value.strip() or "@" in value or not value.isprintable():
            raise DatasetError(
                f"{where}: {key!r} must be a non-empty string without '@', got {value!r}"
                + (' (quote it, e.g. "2.0")' if isinstance(value, int | float) else "")
            )
    description = raw.get("description", "")
    tasks = raw.get("tasks")
    if not isinstance(tasks, Sequence) or isinstance(tasks, str):
        raise DatasetError(f"{where} ({raw['name']}@{raw['version']}): 'tasks' must be a list")
    return RegistryDataset(
        name=raw["name"],
        version=raw["version"],
        description=description if isinstance(description, str) else "",
        raw_tasks=tuple(tasks),
        origin=origin,
        remote=remote,
    )


def check_commit(value: Any, where: str) -> str:
    """A full hex object id (SHA-1 or SHA-256), lowercased; anything else is refused."""
    if not isinstance(value, str) or not _COMMIT.fullmatch(value.strip().lower()):
        raise DatasetError(
            f"{where}: git_commit_id must be a full commit id (40 or 64 hex digits), got {value!r}; "
            "ARES loads only pinned tasks, so a branch, tag, 'head' or a short id is not accepted"
        )
    return value.strip().lower()


def check_task_path(value: Any, where: str) -> str:
    """A relative path inside the repository of plain names (no ``..``, no ``.git``, no patterns)."""
    if not isinstance(value, str) or not value.strip():
        raise DatasetError(f"{where}: 'path' must be a non-empty string, got {value!r}")
    if value.startswith("/") or "\\" in value:
        raise DatasetError(f"{where}: path {value!r} must be relative to the repository's root, with '/'")
    parts = [part for part in value.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise DatasetError(f"{where}: path {value!r} leaves the repository ('..' is not allowed)")
    for part in parts:
        if part.lower() == ".git" or not _PATH_PART.fullmatch(part):
            raise DatasetError(
                f"{where}: path {value!r} has the component {part!r}; components must be plain names "
                "(letters, digits and . _ + = @ , -, not starting with a dot or a dash, not .git)"
            )
    return posixpath.join(*parts) if parts else "."


def check_git_url(value: Any, where: str, *, remote: bool) -> str:
    """A repository URL git may fetch without running a command: https, http, ssh, git (and, from a
    registry on this machine, file:// or an absolute path)."""
    if not isinstance(value, str) or not value.strip():
        raise DatasetError(
            f"{where}: 'git_url' must be a repository URL, got {value!r} (tasks without a git "
            "repository are local directories: run them with --path DIR)"
        )
    url = value.strip()
    if _HELPER.match(url):
        raise DatasetError(
            f"{where}: git_url {value!r} names a git remote helper ('{url.split('::')[0]}::'), which "
            "can run commands; use an https://, ssh:// or git:// URL"
        )
    if not url.isprintable() or any(ch.isspace() for ch in url) or url.startswith("-"):
        raise DatasetError(f"{where}: git_url {value!r} has spaces, control characters or a leading '-'")
    try:
        scheme = _scheme(url)
        host = (urlsplit(url).hostname or "") if "://" in url else ""
    except ValueError as exc:
        raise DatasetError(f"{where}: git_url {value!r} is not a valid URL ({exc})") from None
    if host.startswith("-"):
        raise DatasetError(f"{where}: git_url {value!r} has a host name starting with '-'")
    allowed = NETWORK_SCHEMES if remote else NETWORK_SCHEMES + LOCAL_SCHEMES
    if scheme not in allowed:
        local = scheme in LOCAL_SCHEMES and remote
        reason = (
            "a registry read from the network may not name repositories on this machine"
            if local
            else f"use one of {', '.join(s + '://' for s in allowed)}"
        )
        raise DatasetError(f"{where}: git_url {value!r} is not allowed ({reason})")
    return url


def _scheme(url: str) -> str:
    """The transport git would use for ``url``: its scheme, ``ssh`` for ``user@host:path``, ``file``
    for an absolute path, else the URL's own text (which no allowed scheme matches)."""
    if "://" in url:
        scheme = urlsplit(url).scheme.lower()
        return _SSH_ALIASES.get(scheme, scheme)
    if url.startswith("/"):
        return "file"
    if _SCP_LIKE.match(url):
        return "ssh"
    return url
