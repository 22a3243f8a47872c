"""The layer store on its own: special entries kept, hostile layers refused without a trace, caps,
one extraction for concurrent callers, a private store. Extraction runs as root and as uid 65534."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import secrets
import stat
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from pathlib import Path

import pytest
from layer_kit import CAP_NET_BIND, base_layer, build_tar, entry, hostile_layers, special_layer

from ares.core.rmtree import remove_tree
from ares.images.errors import ImageError
from ares.images.store import LayerLimits, LayerStore
from nobody_python import DROP, SKIP_REASON, nobody_python

SRC = Path(__file__).resolve().parents[3] / "src"
ROOT = os.geteuid() == 0


def diff_id(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def feeder(data: bytes, chunk: int = 3000):
    async def fill(sink) -> None:
        for i in range(0, len(data), chunk):
            await sink(data[i : i + chunk])

    return fill


def assert_no_trace(store: LayerStore) -> None:
    assert list((store.root / "layers").iterdir()) == []
    assert list((store.root / "tmp").iterdir()) == []


# A child interpreter extracts the base and special layers and describes what it wrote, so the same
# check runs as root and as nobody.
DESCRIBE = r"""
import asyncio, hashlib, json, os, stat, sys
from pathlib import Path
from ares.images.store import LayerStore

async def main():
    store = LayerStore(Path(sys.argv[1]))
    out = {}
    for tar in sys.argv[2:]:
        data = Path(tar).read_bytes()
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        async def fill(sink, data=data):
            for i in range(0, len(data), 4096):
                await sink(data[i:i + 4096])
        info, made = await store.ensure(digest, fill)
        assert made and info.diff_id == digest
        root = store.lower(digest)
        for dirpath, dirs, files in os.walk(root):
            for name in dirs + files:
                path = os.path.join(dirpath, name)
                st = os.lstat(path)
                link = stat.S_ISLNK(st.st_mode)
                names = [] if link else os.listxattr(path, follow_symlinks=False)
                xattrs = {n: os.getxattr(path, n, follow_symlinks=False).hex() for n in names}
                out[os.path.relpath(path, root)] = dict(
                    mode=st.st_mode, uid=st.st_uid, gid=st.st_gid, rdev=st.st_rdev, ino=st.st_ino,
                    mtime=st.st_mtime, xattrs=xattrs, link=os.readlink(path) if link else None,
                )
    dirs = [store.root, store.root / "layers", *store.root.glob("layers/*"), store.root / "tmp"]
    modes = {str(p): (stat.S_IMODE(p.stat().st_mode), p.stat().st_uid) for p in dirs}
    print(json.dumps({"entries": out, "modes": modes, "uid": os.geteuid(), "gid": os.getegid()}))

asyncio.run(main())
"""


@pytest.mark.parametrize("who", ["root", "nobody"])
def test_special_entries_as(who: str) -> None:
    if who == "root" and not ROOT:
        pytest.skip("needs the suite to run as root")
    if who == "nobody" and ROOT and nobody_python() is None:
        pytest.skip(SKIP_REASON)
    base = Path(tempfile.mkdtemp(prefix="ares-store-"))
    try:
        drop = who == "nobody" and ROOT
        uid = 65534 if drop else os.geteuid()
        os.chmod(base, 0o755)
        os.chown(base, uid, uid)
        nonce = secrets.token_bytes(8)
        tars = []
        for name, data in (("base.tar", base_layer(nonce)), ("special.tar", special_layer(nonce))):
            (base / name).write_bytes(data)
            tars.append(str(base / name))
        cmd = [sys.executable, "-c", DESCRIBE, str(base / "store"), *tars]
        if drop:
            cmd = [*DROP, str(nobody_python()), *cmd[1:]]
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{SRC}:{sysconfig.get_paths()['purelib']}"}
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, cwd=base)
        assert proc.returncode == 0, proc.stderr[-4000:]
        seen = json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        remove_tree(base)
    e = seen["entries"]
    assert seen["uid"] == uid
    # The store and every dir on the way to a layer's tree: 0700, owned by the invoking user.
    assert seen["modes"] and all(
        mode == (0o700, uid) for mode, _ in [(tuple(v), k) for k, v in seen["modes"].items()]
    )
    # OCI whiteouts and opaque markers became overlay ones.
    assert stat.S_ISCHR(e["etc/gone"]["mode"]) and e["etc/gone"]["rdev"] == 0
    assert e["opq"]["xattrs"].get("user.overlay.opaque") == b"y".hex()
    assert "opq/.wh..wh..opq" not in e and "etc/.wh.gone" not in e and e["etc/kept"]
    # setuid/setgid bits, hardlinks, symlinks, fifos, read-only dirs, times.
    assert stat.S_IMODE(e["bin/su"]["mode"]) == 0o4755 and stat.S_IMODE(e["bin/wall"]["mode"]) == 0o2755
    assert e["bin/su-again"]["ino"] == e["bin/su"]["ino"]
    assert e["bin/sh"]["link"] == "/bin/dash" and e["bin/rel"]["link"] == "../etc/kept"
    assert stat.S_ISFIFO(e["run/fifo"]["mode"]) and "dev/null" not in e
    assert stat.S_IMODE(e["ro"]["mode"]) == 0o555 and stat.S_IMODE(e["ro/inside"]["mode"]) == 0o444
    assert e["bin/su"]["mtime"] == 1_600_000_000 and e["home/user"]["mtime"] == 1_600_000_000
    if who == "root":  # owners and file capabilities are kept
        assert (e["home/user/file"]["uid"], e["home/user/file"]["gid"]) == (1000, 1000)
        assert e["bin/wall"]["gid"] == 5 and e["bin/su"]["uid"] == 0
        assert e["bin/ping"]["xattrs"]["security.capability"] == CAP_NET_BIND.hex()
    else:  # owners collapse to the invoking user (root inside its sandboxes); no capability, still extracted
        assert {(v["uid"], v["gid"]) for v in e.values()} == {(uid, seen["gid"])}
        assert stat.S_IMODE(e["home/user/file"]["mode"]) == 0o600


@pytest.mark.parametrize("case", sorted(hostile_layers()))
async def test_hostile_layers_are_refused_without_a_trace(case: str, tmp_path: Path) -> None:
    data, expected = hostile_layers()[case]
    store = LayerStore(tmp_path / "store")
    escaped = [Path("/etc/escape"), Path("/tmp/escape"), tmp_path / "escape", tmp_path / "store/escape"]
    before = {p for p in escaped if p.exists()}
    with pytest.raises(ImageError) as err:
        await store.ensure(diff_id(data), feeder(data), label="sha256:" + "ab" * 32)
    text = str(err.value)
    assert expected in text and "sha256:" + "ab" * 32 in text and "nothing was stored" in text, text
    assert_no_trace(store)
    assert {p for p in escaped if p.exists()} == before
    assert sorted(os.listdir(store.root)) == ["layers", "locks", "tmp"]


async def test_a_wrong_diff_id_stores_nothing(tmp_path: Path) -> None:
    data = build_tar([entry("a", data=b"1")])
    store = LayerStore(tmp_path / "store")
    with pytest.raises(ImageError, match=r"hashes to .* not to the diff_id"):
        await store.ensure("sha256:" + "0" * 64, feeder(data), label="sha256:" + "cd" * 32)
    assert_no_trace(store)


async def test_size_and_member_caps_stop_a_bomb(tmp_path: Path) -> None:
    big = build_tar([entry("zeros", data=bytes(1 << 20))])
    store = LayerStore(tmp_path / "store", LayerLimits(max_bytes=100_000))
    with pytest.raises(ImageError, match="larger than the cap of 100000 bytes"):
        await store.ensure(diff_id(big), feeder(big, 1 << 16))
    assert_no_trace(store)
    many = build_tar([entry(f"f{i}", data=b"") for i in range(10)])
    store = LayerStore(tmp_path / "store2", LayerLimits(max_members=5))
    with pytest.raises(ImageError, match="more than 5 members"):
        await store.ensure(diff_id(many), feeder(many))
    assert_no_trace(store)


async def test_not_a_tar_is_refused(tmp_path: Path) -> None:
    junk = b"\x01not a tar at all" * 100
    store = LayerStore(tmp_path / "store")
    with pytest.raises(ImageError, match="not a valid tar"):
        await store.ensure(diff_id(junk), feeder(junk))
    assert_no_trace(store)


async def test_concurrent_ensures_extract_once(tmp_path: Path) -> None:
    data = build_tar([entry(f"dir/f{i}", data=os.urandom(5000)) for i in range(50)])
    store = LayerStore(tmp_path / "store")
    calls = 0

    async def fill(sink) -> None:
        nonlocal calls
        calls += 1
        await feeder(data, 1000)(sink)

    results = await asyncio.gather(*(store.ensure(diff_id(data), fill) for _ in range(20)))
    assert calls == 1 and sum(made for _, made in results) == 1
    assert {info for info, _ in results} == {store.info(diff_id(data))}
    assert len(os.listdir(store.lower(diff_id(data)) / "dir")) == 50


async def test_a_failing_source_leaves_nothing_and_a_retry_works(tmp_path: Path) -> None:
    data = build_tar([entry("a", data=os.urandom(100_000))])
    store = LayerStore(tmp_path / "store")

    async def broken(sink) -> None:
        await sink(data[:50_000])
        raise ImageError("the registry went away")

    with pytest.raises(ImageError, match="went away"):
        await store.ensure(diff_id(data), broken)
    assert_no_trace(store)
    info, made = await store.ensure(diff_id(data), feeder(data))
    assert made and info.size_bytes == 100_000 and info.entries == 1


def test_a_store_of_another_user_is_refused(tmp_path: Path) -> None:
    if not ROOT:
        pytest.skip("needs root to make a dir owned by someone else")
    (tmp_path / "store").mkdir()
    os.chown(tmp_path / "store", 65534, 65534)
    with pytest.raises(ImageError, match="owned by uid 65534"):
        LayerStore(tmp_path / "store").prepare()


def test_tar_kinds_in_kit_are_what_they_claim() -> None:
    with tarfile.open(fileobj=io.BytesIO(special_layer(b"n"))) as tar:
        names = set(tar.getnames())
    assert "./opq/.wh..wh..opq" in names and "./etc/.wh.gone" in names
