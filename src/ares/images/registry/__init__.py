"""A daemonless OCI distribution client: references, authenticated transport, manifests and blobs.

Modelled on the split of containers/image: a reference names an image, a transport speaks HTTP with
auth, and manifest and blob readers sit on top. Each is one module with a small interface.
"""

from ares.images.registry.blobs import fetch_blob, fetch_layer, fetch_layer_to_file, gather_bounded
from ares.images.registry.config import Endpoint, Mirror, RegistryConfig, RegistryEntry
from ares.images.registry.credentials import Credentials, CredentialSource, DockerConfigCredentials
from ares.images.registry.limits import Limits
from ares.images.registry.manifest import Layer, Platform, ResolvedImage, host_platform, resolve
from ares.images.registry.reference import Reference, parse_reference
from ares.images.registry.transport import EndpointUnavailable, RegistryClient, RetryPolicy

__all__ = [
    "CredentialSource",
    "Credentials",
    "DockerConfigCredentials",
    "Endpoint",
    "EndpointUnavailable",
    "Layer",
    "Limits",
    "Mirror",
    "Platform",
    "Reference",
    "RegistryClient",
    "RegistryConfig",
    "RegistryEntry",
    "ResolvedImage",
    "RetryPolicy",
    "fetch_blob",
    "fetch_layer",
    "fetch_layer_to_file",
    "gather_bounded",
    "host_platform",
    "parse_reference",
    "resolve",
]
