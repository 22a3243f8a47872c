"""The docker backend: sandboxes as containers of any Docker API engine (Docker, Podman).

Needs the ``docker`` SDK: ``pip install 'ares[docker]'``.
"""

try:
    import docker as _sdk  # noqa: F401  (fail early, with the fix in the message)
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("the docker backend needs the docker SDK: pip install 'ares[docker]'") from exc

from ares.sandbox.docker.dockerfiles import context_hash
from ares.sandbox.docker.engine import DEFAULT_IMAGE, DockerConfig, DockerEngine
from ares.sandbox.docker.factory import DockerSandboxFactory
from ares.sandbox.docker.images import DockerBuildError
from ares.sandbox.docker.janitor import GcReport, gc
from ares.sandbox.docker.sandbox import DockerSandbox

__all__ = [
    "DEFAULT_IMAGE",
    "DockerBuildError",
    "DockerConfig",
    "DockerEngine",
    "DockerSandbox",
    "DockerSandboxFactory",
    "GcReport",
    "context_hash",
    "gc",
]
