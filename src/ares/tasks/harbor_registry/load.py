"""``NAME[@VERSION]`` of a registry to loaded Harbor tasks, their repositories fetched into the cache."""

from __future__ import annotations

import difflib
import re
from dataclasses import replace
from pathlib import Path

from ares.images.cache import default_cache_dir
from ares.tasks.harbor import load_harbor_task
from ares.tasks.harbor_registry.checkout import checkout
from ares.tasks.harbor_registry.model import DatasetError, Registry, RegistryDataset, RegistryTask
from ares.tasks.harbor_registry.safety import check_task_tree
from ares.tasks.harbor_registry.source import read_registry
from ares.tasks.model import Task, VerifierMode

_NUMERIC = re.compile(r"\d+(\.\d+)*")


def datasets_cache(cache_dir: Path | None = None) -> Path:
    """``datasets/`` under the ARES cache (``$ARES_CACHE_DIR``, else ``~/.cache/ares``), like images."""
    return (cache_dir or default_cache_dir()).absolute() / "datasets"


def load_registry_dataset(
    name: str,
    *,
    registry: str | Path | None = None,
    cache_dir: Path | None = None,
    verifier_mode: VerifierMode | None = None,
) -> list[Task]:
    """The tasks of dataset ``name`` (``NAME@VERSION`` or ``NAME``) of a Harbor registry (a path or URL;
    default ``$ARES_HARBOR_REGISTRY``, else Harbor's public registry), in the registry's order.

    Each task's repository is fetched at its pinned commit into the cache (once; later loads use the
    cache without the network). ``Task.id`` is the registry's task name.
    """
    root = datasets_cache(cache_dir)
    dataset = resolve(read_registry(registry, root / "registries"), name)
    tasks = dataset.tasks()
    groups: dict[tuple[str, str], list[str]] = {}
    for task in tasks:
        groups.setdefault((task.git_url, task.commit), []).append(task.path)
    trees = {key: checkout(root, key[0], key[1], paths) for key, paths in groups.items()}
    return [_load(task, trees[task.git_url, task.commit], dataset, verifier_mode) for task in tasks]


def resolve(registry: Registry, name: str) -> RegistryDataset:
    """The dataset ``NAME@VERSION``, or ``NAME``'s only or newest numeric version; errors list the
    versions or the names that come close."""
    wanted, _, version = name.strip().partition("@")
    if not wanted:
        raise DatasetError(f"--dataset {name!r}: give a dataset name, e.g. terminal-bench@2.0")
    versions = registry.versions(wanted)
    if not versions:
        names = registry.names()
        close = difflib.get_close_matches(wanted, names, n=5, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}?" if close else f"it has {len(names)}: {_few(names)}"
        raise DatasetError(f"no dataset {wanted!r} in the registry {registry.origin}; {hint}")
    if not version:
        version = _newest(wanted, versions)
    matches = [d for d in registry.datasets if d.name == wanted and d.version == version]
    if not matches:
        raise DatasetError(f"dataset {wanted!r} has no version {version!r}; versions: {', '.join(versions)}")
    if len(matches) > 1:
        raise DatasetError(f"the registry {registry.origin} lists {wanted}@{version} {len(matches)} times")
    return matches[0]


def _newest(name: str, versions: list[str]) -> str:
    unique = list(dict.fromkeys(versions))
    if len(unique) == 1:
        return unique[0]
    if all(_NUMERIC.fullmatch(v) for v in unique):
        return max(unique, key=lambda v: tuple(int(n) for n in v.split(".")))
    raise DatasetError(
        f"dataset {name!r} has several versions ({', '.join(unique)}); name one, e.g. {name}@{unique[-1]}"
    )


def _few(names: list[str], count: int = 12) -> str:
    shown = ", ".join(sorted(names)[:count])
    return shown + (f", ... ({len(names) - count} more)" if len(names) > count else "")


def _load(task: RegistryTask, tree: Path, dataset: RegistryDataset, mode: VerifierMode | None) -> Task:
    task_dir = check_task_tree(tree, task.path, f"task {task.name!r} of {dataset.label}")
    loaded = load_harbor_task(task_dir, verifier_mode=mode)
    origin = {"dataset": dataset.label, "git_url": task.git_url, "commit": task.commit, "path": task.path}
    return replace(loaded, id=task.name, metadata={**loaded.metadata, "registry": origin})
