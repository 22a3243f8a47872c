"""OpenAI/Anthropic-compatible HTTP interception proxy: black-box agents become step-able environments.

Needs the ``proxy`` extra (aiohttp). See ``InterceptionProxy``.
"""

try:
    import aiohttp  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the installed extras
    raise ImportError("ares.proxy needs aiohttp: pip install 'ares[proxy]'") from e

from ares.proxy.errors import ApiError, ProxyError
from ares.proxy.handlers import METADATA_KEY
from ares.proxy.server import InterceptionProxy, ServedSocket
from ares.proxy.session import ProxySession

__all__ = ["METADATA_KEY", "ApiError", "InterceptionProxy", "ProxyError", "ProxySession", "ServedSocket"]
