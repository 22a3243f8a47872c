"""Layer tars for the store tests: a layer with every special kind of entry, and hostile layers.

Built with tarfile here (no tool writes hostile tars on purpose) and pushed to the loopback registry
through its API, gzip-compressed or not.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile

import httpx
from oci_registry_kit import Registry

#: The xattr value of ``setcap cap_net_bind_service=+ep`` (VFS_CAP_REVISION_2, effective).
CAP_NET_BIND = bytes.fromhex("0100000200040000000000000000000000000000")


CAP_HEADER = {"SCHILY.xattr.security.capability": CAP_NET_BIND.decode("latin-1")}
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
IMAGE_CONFIG = {"Env": ["PATH=/usr/bin:/bin", "A=1=2"], "WorkingDir": "/work", "User": "1000"}


def entry(name: str, kind: bytes = tarfile.REGTYPE, data: bytes | None = None, **attrs: object) -> tuple:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mtime = 1_600_000_000
    info.mode = 0o644 if kind == tarfile.REGTYPE else 0o755
    for key, value in attrs.items():
        setattr(info, key, value)
    if data is not None:
        info.size = len(data)
    return info, data


def build_tar(entries: list[tuple]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def base_layer(nonce: bytes) -> bytes:
    """What the special layer deletes and hides: files it whites out and a dir it makes opaque."""
    return build_tar([
        entry("etc/", tarfile.DIRTYPE), entry("etc/gone", data=b"old\n"), entry("etc/kept", data=b"kept\n"),
        entry("opq/", tarfile.DIRTYPE), entry("opq/hidden", data=b"hidden\n"), entry("nonce", data=nonce),
    ])  # fmt: skip


def special_layer(nonce: bytes) -> bytes:
    """Whiteouts, an opaque dir, hardlinks, setuid/setgid, symlinks, owners, a fifo, a capability xattr."""
    return build_tar([
        entry("./", tarfile.DIRTYPE),
        entry("./etc/", tarfile.DIRTYPE, mode=0o755),
        entry("./etc/.wh.gone", data=b""),
        entry("./opq/", tarfile.DIRTYPE),
        entry("./opq/.wh..wh..opq", data=b""),
        entry("./opq/new", data=b"new\n"),
        entry("./bin/", tarfile.DIRTYPE),
        entry("./bin/su", data=b"#!/bin/sh\n", mode=0o4755),
        entry("./bin/wall", data=b"#!/bin/sh\n", mode=0o2755, gid=5),
        entry("./bin/ping", data=b"ping\n", mode=0o755, pax_headers=CAP_HEADER),
        entry("./bin/su-again", tarfile.LNKTYPE, linkname="./bin/su"),
        entry("./bin/sh", tarfile.SYMTYPE, linkname="/bin/dash"),
        entry("./bin/rel", tarfile.SYMTYPE, linkname="../etc/kept"),
        entry("./home/", tarfile.DIRTYPE),
        entry("./home/user/", tarfile.DIRTYPE, uid=1000, gid=1000, mode=0o750),
        entry("./home/user/file", data=b"mine\n", uid=1000, gid=1000, mode=0o600),
        entry("./ro/", tarfile.DIRTYPE, mode=0o555),
        entry("./ro/inside", data=b"x\n", mode=0o444),
        entry("./run/fifo", tarfile.FIFOTYPE, mode=0o644),
        entry("./dev/null", tarfile.CHRTYPE, devmajor=1, devminor=3, mode=0o666),  # skipped, as debootstrap's
        entry("./nonce", data=nonce),
    ])  # fmt: skip


def hostile_layers() -> dict[str, tuple[bytes, str]]:
    """name -> (tar, text the ImageError must contain)."""
    link = entry("evil", tarfile.SYMTYPE, linkname="/tmp")
    return {
        "dotdot": (build_tar([entry("../escape", data=b"x")]), "'..'"),
        "absolute": (build_tar([entry("/etc/escape", data=b"x")]), "absolute path"),
        "through-symlink": (build_tar([link, entry("evil/escape", data=b"x")]), "not a directory"),
        "hardlink-out": (build_tar([entry("h", tarfile.LNKTYPE, linkname="../../etc/passwd")]), "'..'"),
        "hardlink-absent": (build_tar([entry("h", tarfile.LNKTYPE, linkname="etc/passwd")]), "not a file"),
        "hardlink-to-dir": (
            build_tar([entry("d/", tarfile.DIRTYPE), entry("h", tarfile.LNKTYPE, linkname="d")]),
            "not a file",
        ),
        "device": (build_tar([entry("etc/sda", tarfile.BLKTYPE, devmajor=8, devminor=0)]), "device node"),
        "chardev": (build_tar([entry("usr/mem", tarfile.CHRTYPE, devmajor=1, devminor=1)]), "device node"),
        "duplicate": (build_tar([entry("a", data=b"1"), entry("a", data=b"2")]), "appears twice"),
    }


def push_layers(
    registry: Registry, repository: str, tag: str, layers: list[bytes], *, compress: bool = True,
    diff_ids: list[str] | None = None, config: dict | None = None,
) -> str:  # fmt: skip
    """Push an image of ``layers`` (tars) through the registry API; returns its manifest digest.

    ``diff_ids`` overrides the config's (to forge a mismatch).
    """
    base = f"http://{registry.host}/v2/{repository}"
    with httpx.Client(timeout=30) as http:

        def upload(data: bytes) -> dict[str, object]:
            digest = f"sha256:{hashlib.sha256(data).hexdigest()}"
            start = http.post(f"{base}/blobs/uploads/")
            start.raise_for_status()
            location = httpx.URL(base).join(start.headers["location"])
            http.put(location.copy_merge_params({"digest": digest}), content=data).raise_for_status()
            return {"digest": digest, "size": len(data)}

        kind = "application/vnd.oci.image.layer.v1.tar" + ("+gzip" if compress else "")
        blobs = [{"mediaType": kind, **upload(gzip.compress(t, mtime=0) if compress else t)} for t in layers]
        doc = {
            "architecture": "amd64",
            "os": "linux",
            "config": config
            or {"Env": ["PATH=/usr/bin:/bin", "A=1=2"], "WorkingDir": "/work", "User": "1000"},
            "rootfs": {
                "type": "layers",
                "diff_ids": diff_ids or [f"sha256:{hashlib.sha256(t).hexdigest()}" for t in layers],
            },
        }
        manifest = json.dumps({
            "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": CONFIG_TYPE, **upload(json.dumps(doc).encode())},
            "layers": blobs,
        }).encode()  # fmt: skip
        http.put(
            f"{base}/manifests/{tag}",
            content=manifest,
            headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"},
        ).raise_for_status()
    return f"sha256:{hashlib.sha256(manifest).hexdigest()}"
