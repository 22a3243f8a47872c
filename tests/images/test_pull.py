"""``pull_image`` against a real registry on loopback: formats, policies, special and hostile layers,
one download per layer for concurrent pulls (tasks and processes), prune and disk use, a real Debian."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from aiohttp import web
from layer_kit import base_layer, build_tar, entry, hostile_layers, push_layers, special_layer
from oci_registry_kit import Pushed, Registry, make_client, serve

from ares.images.cache import ImageCache
from ares.images.errors import ImageError
from ares.images.progress import PullEvent, build_listener
from ares.images.pull import image_store, pull_image
from ares.images.rootfs import RootfsPlan
from ares.images.store import BuildCacheRoots, prune, usage

SRC = Path(__file__).resolve().parents[2] / "src"


def lowers(plan: RootfsPlan) -> list[Path]:
    assert len(plan.mounts) == 1 and plan.mounts[0].target == "/"
    return [Path(p) for p in plan.mounts[0].lower]


def read(plan: RootfsPlan, rel: str) -> bytes:
    """A file as the overlay would show it (no whiteouts involved)."""
    for lower in lowers(plan):
        if os.path.lexists(lower / rel):
            return (lower / rel).read_bytes()
    raise FileNotFoundError(rel)


def new_layers(count: int, size: int = 200_000) -> list[bytes]:
    return [build_tar([entry(f"l{i}/data", data=os.urandom(size))]) for i in range(count)]


@pytest.fixture
def cache(tmp_path: Path) -> ImageCache:
    return ImageCache(tmp_path / "cache")


@pytest.fixture
async def counting(registry: Registry) -> AsyncIterator[tuple[str, collections.Counter[str]]]:
    """A proxy in front of the registry that counts blob GETs by digest; yields (its host, counts)."""
    counts: collections.Counter[str] = collections.Counter()
    http = httpx.AsyncClient(timeout=60)

    async def forward(request: web.Request) -> web.Response:
        if request.method == "GET" and "/blobs/" in request.path:
            counts[request.path.rsplit("/", 1)[1]] += 1
        skip = {"host", "content-length", "transfer-encoding", "connection"}
        headers = {k: v for k, v in request.headers.items() if k.lower() not in skip}
        upstream = await http.request(
            request.method,
            f"http://{registry.host}{request.path_qs}",
            headers=headers,
            content=await request.read(),
        )
        drop = {"content-length", "transfer-encoding", "connection", "content-encoding"}
        return web.Response(
            status=upstream.status_code,
            body=upstream.content,
            headers={k: v for k, v in upstream.headers.items() if k.lower() not in drop},
        )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    async with serve(app) as host:
        yield host, counts
    await http.aclose()


async def test_pull_then_pull_again_moves_nothing(
    registry: Registry, images: dict[str, Pushed], cache: ImageCache
) -> None:
    events: list[PullEvent] = []
    async with make_client(registry.host) as client:
        for kind in ("gzip", "zstd", "v2s2", "raw"):
            name = f"{registry.host}/{images[kind].repository}:v1"
            first = await pull_image(name, cache=cache, client=client, listener=events.append)
            assert first.layers_downloaded == 1 and first.bytes_downloaded > 0
            assert first.diff_ids == (images[kind].diff_id,) and first.transport == "registry"
            assert first.reference == f"{name}@{first.manifest_digest}"
            for rel, content in images[kind].files.items():
                assert read(first.plan, rel) == content
            again = await pull_image(name, cache=cache, client=client, policy="always")
            assert (again.bytes_downloaded, again.layers_downloaded) == (0, 0)
            assert again.manifest_digest == first.manifest_digest and again.plan == first.plan
    # "never" works from the store alone: no client, nothing listening on the network.
    offline = await pull_image(f"{registry.host}/ares/gzip:v1", cache=cache, policy="never")
    assert offline.config.env["PATH"] == "/usr/bin:/bin" and offline.config.cmd == ("/bin/sh",)
    by_digest = await pull_image(
        f"{registry.host}/ares/gzip@{offline.manifest_digest}", cache=cache, policy="never"
    )
    assert by_digest.plan == offline.plan
    with pytest.raises(ImageError, match="pull policy is 'never'"):
        await pull_image(f"{registry.host}/ares/absent:v1", cache=cache, policy="never")
    states = [(e.layer is None, e.state) for e in events]
    assert (True, "resolving") in states and (False, "downloading") in states and (True, "done") in states
    assert {e.state for e in events if e.layer is None and e.finished} == {"done"}


async def test_special_layers_through_a_registry(registry: Registry, cache: ImageCache) -> None:
    nonce = secrets.token_bytes(8)
    repo = f"ares/special-{secrets.token_hex(4)}"
    push_layers(registry, repo, "v1", [base_layer(nonce), special_layer(nonce)])
    events: list[object] = []
    async with make_client(registry.host) as client:
        with build_listener(events.append):  # the context listener gets the events
            image = await pull_image(f"{registry.host}/{repo}:v1", cache=cache, client=client)
    assert any(isinstance(e, PullEvent) for e in events)
    top, bottom = lowers(image.plan)
    assert os.stat(top / "etc/gone", follow_symlinks=False).st_rdev == 0 and (bottom / "etc/gone").exists()
    assert os.getxattr(top / "opq", "user.overlay.opaque") == b"y"
    assert os.stat(top / "bin/su").st_mode & 0o7777 == 0o4755
    assert image.config.env == {"PATH": "/usr/bin:/bin", "A": "1=2"}
    assert (image.config.workdir, image.config.user) == ("/work", "1000")
    assert (
        image.size_bytes
        == sum(len(v) for v in [b"old\n", b"kept\n", b"hidden\n"]) + 2 * len(nonce) + 4 + 20 + 5 + 5 + 2
    )


@pytest.mark.parametrize("case", ["dotdot", "through-symlink", "device"])
async def test_hostile_layer_from_a_registry(registry: Registry, cache: ImageCache, case: str) -> None:
    data, expected = hostile_layers()[case]
    good = new_layers(1)[0]
    repo = f"ares/hostile-{case}-{secrets.token_hex(4)}"
    push_layers(registry, repo, "v1", [good, data])
    async with make_client(registry.host) as client:
        with pytest.raises(ImageError) as err:
            await pull_image(f"{registry.host}/{repo}:v1", cache=cache, client=client, concurrency=1)
    assert expected in str(err.value) and "layer sha256:" in str(err.value)
    store = image_store(cache)
    assert store.records() == [] and store.refs() == {}
    assert os.listdir(store.root / "tmp") == []
    # The good layer may stay (content-addressed, verified); prune frees it since no image uses it.
    report = await prune(store)
    assert os.listdir(store.root / "layers") == [] and len(report.layers) <= 1


async def test_forged_diff_id_is_refused(registry: Registry, cache: ImageCache) -> None:
    data = new_layers(1)[0]
    repo = f"ares/forged-{secrets.token_hex(4)}"
    push_layers(registry, repo, "v1", [data], diff_ids=["sha256:" + "1" * 64])
    async with make_client(registry.host) as client:
        with pytest.raises(ImageError, match="sha256:1111"):
            await pull_image(f"{registry.host}/{repo}:v1", cache=cache, client=client)
    store = image_store(cache)
    assert os.listdir(store.root / "layers") == [] and os.listdir(store.root / "tmp") == []


async def test_twenty_concurrent_pulls_download_each_layer_once(
    registry: Registry, counting: tuple[str, collections.Counter[str]], cache: ImageCache
) -> None:
    host, counts = counting
    repo = f"ares/many-{secrets.token_hex(4)}"
    layers = new_layers(3)
    push_layers(registry, repo, "v1", layers)
    async with make_client(host) as client:
        pulls = await asyncio.gather(
            *(pull_image(f"{host}/{repo}:v1", cache=cache, client=client) for _ in range(20))
        )
    assert sum(p.layers_downloaded for p in pulls) == 3
    assert len({p.plan for p in pulls}) == 1
    layer_digests = image_store(cache).records()[0].layer_digests
    assert [counts[d] for d in layer_digests] == [1, 1, 1]


PULL = """
import asyncio, json, sys
from pathlib import Path
from ares.images.cache import ImageCache
from ares.images.pull import pull_image
image = asyncio.run(pull_image(sys.argv[1], cache=ImageCache(Path(sys.argv[2]))))
print(json.dumps({"layers": image.layers_downloaded, "digest": image.manifest_digest}))
"""


async def test_two_processes_pull_once(
    registry: Registry, counting: tuple[str, collections.Counter[str]], cache: ImageCache
) -> None:
    host, counts = counting
    repo = f"ares/procs-{secrets.token_hex(4)}"
    push_layers(registry, repo, "v1", new_layers(3, 2_000_000))
    env = {**os.environ, "PYTHONPATH": str(SRC), "ARES_INSECURE_REGISTRIES": host}
    args = [sys.executable, "-c", PULL, f"{host}/{repo}:v1", str(cache.root)]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    procs = [await asyncio.create_subprocess_exec(*args, env=env, **pipes) for _ in range(2)]
    outs = [await p.communicate() for p in procs]
    assert all(p.returncode == 0 for p in procs), [err.decode()[-2000:] for _, err in outs]
    results = [json.loads(out.decode().strip().splitlines()[-1]) for out, _ in outs]
    assert sum(r["layers"] for r in results) == 3 and len({r["digest"] for r in results}) == 1
    layer_digests = image_store(cache).records()[0].layer_digests
    assert [counts[d] for d in layer_digests] == [1, 1, 1]


async def test_usage_and_prune_keep_what_is_used(registry: Registry, cache: ImageCache) -> None:
    shared, own_a, own_b = new_layers(3)
    suffix = secrets.token_hex(4)
    push_layers(registry, f"ares/a-{suffix}", "v1", [shared, own_a])
    push_layers(registry, f"ares/b-{suffix}", "v1", [shared, own_b])
    async with make_client(registry.host) as client:
        a = await pull_image(f"{registry.host}/ares/a-{suffix}:v1", cache=cache, client=client)
        b = await pull_image(f"{registry.host}/ares/b-{suffix}:v1", cache=cache, client=client)
    assert b.layers_downloaded == 1  # the shared layer was stored by a's pull
    store = image_store(cache)
    use = {u.record.manifest_digest: u for u in usage(store)}
    assert use[a.manifest_digest].shared_bytes == 200_000 and use[a.manifest_digest].unique_bytes == 200_000
    assert (await prune(store)).layers == ()  # everything is used
    # A Dockerfile-built image on b (its record names b's digest) keeps b through prune --all.
    (cache.root / "images").mkdir(parents=True)
    (cache.root / "images" / "k.json").write_text(json.dumps({"base": f"pulled {b.reference}"}))
    report = await prune(store, everything=True, roots=[BuildCacheRoots(cache.root)])
    assert report.images == (f"{registry.host}/ares/a-{suffix}:v1@{a.manifest_digest}",)
    assert report.layers == (a.diff_ids[1],) and report.freed_bytes == 200_000
    assert [r.manifest_digest for r in store.records()] == [b.manifest_digest]
    assert all(Path(p).is_dir() for p in lowers(store.plan(store.records()[0])))
    (cache.root / "images" / "k.json").unlink()
    report = await prune(store, everything=True)
    assert store.records() == [] and os.listdir(store.root / "layers") == []


async def test_debian_end_to_end(registry: Registry, debian_image: str, cache: ImageCache) -> None:
    async with make_client(registry.host) as client:
        image = await pull_image(debian_image, cache=cache, client=client)
    assert any(os.path.lexists(lower / "usr/bin/python3") for lower in lowers(image.plan))
    assert b"bookworm" in read(image.plan, "usr/lib/os-release")
    assert image.size_bytes > 50_000_000 and image.layers_downloaded == len(set(image.diff_ids))


async def test_pull_from_an_oci_layout_shares_the_store(tmp_path: Path, cache: ImageCache) -> None:
    from oci_registry_kit import write_layout

    files = {"etc/name": b"layout\n", "nonce": secrets.token_bytes(8)}
    write_layout(tmp_path / "layout", [("amd64", files)])
    first = await pull_image(f"oci:{tmp_path / 'layout'}:img", cache=cache)
    assert first.transport == "oci" and first.layers_downloaded == 1
    assert read(first.plan, "etc/name") == b"layout\n"
    assert first.reference == f"oci:{tmp_path / 'layout'}:img@{first.manifest_digest}"
    again = await pull_image(f"oci:{tmp_path / 'layout'}:img", cache=cache, policy="always")
    assert (again.layers_downloaded, again.plan) == (0, first.plan)
