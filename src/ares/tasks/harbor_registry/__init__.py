"""Harbor datasets by name: a ``registry.json`` resolves ``NAME@VERSION`` to tasks pinned to git
commits, fetched once into the ARES cache and loaded as Harbor task directories."""

from ares.tasks.harbor_registry.load import datasets_cache, load_registry_dataset, resolve
from ares.tasks.harbor_registry.model import DatasetError, Registry, RegistryDataset, RegistryTask
from ares.tasks.harbor_registry.source import DEFAULT_REGISTRY_URL, REGISTRY_ENV, read_registry

__all__ = [
    "DEFAULT_REGISTRY_URL",
    "REGISTRY_ENV",
    "DatasetError",
    "Registry",
    "RegistryDataset",
    "RegistryTask",
    "datasets_cache",
    "load_registry_dataset",
    "read_registry",
    "resolve",
]
