"""What can make a named image available when it cannot be pulled: the advice an error ends with.

Only what can work for that image is named: a stand-in for the names one can serve (``python:<host
x.y>``, ``debian:*``, ``ubuntu:*``; ``ARES_IMAGE_FALLBACK=standin``), else a registry mirror, a
pre-pulled copy (``oci:``/``docker-archive:``) or a build from its Dockerfile.
"""

from __future__ import annotations

from ares.errors import FIX
from ares.images.build.standins import UnsupportedBaseError, canonical_name, standin_for

FALLBACK_ENV = "ARES_IMAGE_FALLBACK"


def unpullable_remedy(name: str, *, fallback: str, host: str | None) -> str:
    """``FIX`` + the way(s) to get ``name`` without its registry, for a build with ``fallback``."""
    try:
        base, how = standin_for(name)
    except UnsupportedBaseError as exc:
        no_standin = f"{exc}; "
    else:
        if fallback == "off":
            return (
                f"{FIX}set {FALLBACK_ENV}=standin (or `ares images build --fallback standin`) to build "
                f"offline on the stand-in {base.name} ({how})"
            )
        no_standin = ""
    canon = canonical_name(name)
    short = canon.rpartition(":")[0].rsplit("/", 1)[-1]
    mirror = f"ARES_REGISTRY_MIRRORS={host or 'docker.io'}=HOST:PORT"
    return (
        f"{FIX}{no_standin}make it available another way: a registry mirror in reach ({mirror}), a "
        "pre-pulled copy named instead (oci:DIR[:TAG] or docker-archive:FILE), or its Dockerfile built "
        f"under that name (`ares images build DIR -t {canon}`; a SWE set builds images/{short}/Dockerfile "
        "beside its instances file on first use)"
    )
