"""Random hostile trees for the carry property tests: what an agent may leave in /testbed.

A tree is a list of ``Node`` (path relative to /testbed as bytes, kind, and a parameter), built on
the host in an overlay-upper layout (``<upper>/_root/testbed/...``). Its ``expectation`` says what a
carry with ``BOUNDS`` must do: refuse (the entries that break a bound, outside dropped subtrees), or
carry exactly the entries ``drop`` does not take out.
"""

from __future__ import annotations

import os
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st

from ares.images.rootfs import OverlayMount
from ares.sandbox.carry_bounds import CarryBounds
from ares.tasks.swe import changes

ROOT = "/testbed"
MOUNTS = (OverlayMount("/", ("/nonexistent",)),)
TEST_ROOTS = ("pkg/tests",)
BOUNDS = CarryBounds(
    max_entries=60, max_file_bytes=65536, max_total_bytes=200_000, sparse_slack=8192, max_depth=6,
    max_path_bytes=160, deadline_s=60.0,
)  # fmt: skip
NAMES = (
    b"a", b"b", b"pkg", b"tests", b"conftest.py", b".git", b"__pycache__", b"x.pyc", b"mod.py",
    b"odd\nname", b"\xff\xfe", b"-rf", b" ", b"sitecustomize.py", b"__init__.py",
)  # fmt: skip
#: Benign kinds weigh more, so that about half the trees are carried whole.
KINDS = (
    ("dir",) * 6
    + ("file",) * 8
    + ("symlink",) * 3
    + ("hardlink",) * 2
    + ("deep", "flood")
    + (
        "big",
        "sparse",
        "fifo",
        "socket",
        "long",
    )
)
DIR_MODES = (0o755,) * 8 + (0o700, 0o000, 0o300)
FILE_MODES = (0o644,) * 8 + (0o755, 0o000, 0o200)
LINK_TARGETS = ("{outside}/secret", "../../../../../../outside", ".", "loop", "{outside}", "/etc/passwd")


@dataclass(frozen=True)
class Node:
    path: bytes
    kind: str  # dir, file, symlink, fifo, socket, hardlink
    mode: int = 0o644
    size: int = 0
    sparse: bool = False
    target: bytes = b""


@st.composite
def trees(draw: st.DrawFn, specials: bool = True) -> list[Node]:
    """A random tree: dirs first picked as parents of later entries, with every hostile kind."""
    nodes: list[Node] = []
    dirs: list[bytes] = [b""]
    taken: set[bytes] = {b""}
    kinds = KINDS if specials else tuple(k for k in KINDS if k not in ("fifo", "socket"))
    for _ in range(draw(st.integers(0, 14))):
        parent = dirs[draw(st.integers(0, len(dirs) - 1))]
        name = draw(st.sampled_from(NAMES))
        path = parent + b"/" + name if parent else name
        if path in taken:
            continue
        kind = draw(st.sampled_from(kinds))
        taken.add(path)
        if kind == "dir":
            nodes.append(Node(path, "dir", draw(st.sampled_from(DIR_MODES))))
            dirs.append(path)
        elif kind == "deep":
            for level in range(draw(st.integers(1, 9))):
                path = path if level == 0 else path + b"/d"
                nodes.append(Node(path, "dir", 0o755))
                taken.add(path)
            dirs.append(path)
        elif kind == "flood":
            nodes.append(Node(path, "dir", 0o755))
            dirs.append(path)
            nodes += [Node(path + b"/f%d" % i, "file", 0o644, 1) for i in range(draw(st.integers(1, 64)))]
        elif kind == "long":
            nodes.append(Node(parent + b"/" + b"L" * 200 if parent else b"L" * 200, "file", 0o644, 1))
        elif kind in ("file", "big", "sparse"):
            size = {"file": draw(st.integers(0, 3000)), "big": BOUNDS.max_file_bytes + 1, "sparse": 40_000}
            nodes.append(Node(path, "file", draw(st.sampled_from(FILE_MODES)), size[kind], kind == "sparse"))
        elif kind == "symlink":
            nodes.append(Node(path, "symlink", target=draw(st.sampled_from(LINK_TARGETS)).encode()))
        elif kind == "hardlink":
            files = [n for n in nodes if n.kind == "file" and n.mode & 0o400]
            if files:
                nodes.append(Node(path, "hardlink", target=files[draw(st.integers(0, len(files) - 1))].path))
        else:
            nodes.append(Node(path, kind))
    return nodes


def build(nodes: list[Node], upper: Path, outside: Path) -> Path:
    """The tree below ``upper/_root/testbed`` (modes set last, deepest first); returns that dir."""
    top = upper / "_root" / "testbed"
    top.mkdir(parents=True)
    base = os.fsencode(top)
    for node in nodes:
        path = base + b"/" + node.path
        if node.kind == "dir":
            os.mkdir(path)
        elif node.kind == "file":
            with open(path, "wb") as f:
                if node.sparse:
                    f.truncate(node.size)
                else:
                    f.write(b"x" * node.size)
        elif node.kind == "symlink":
            os.symlink(node.target.replace(b"{outside}", os.fsencode(outside)), path)
        elif node.kind == "hardlink":
            os.link(base + b"/" + node.target, path)
        elif node.kind == "fifo":
            os.mkfifo(path)
        elif node.kind == "socket":
            sock = socket.socket(socket.AF_UNIX)
            here = os.getcwd()
            try:  # bind by a short relative name (sun_path is 108 bytes)
                os.chdir(os.path.dirname(path))
                sock.bind(os.path.basename(path))
            finally:
                os.chdir(here)
                sock.close()
    for node in sorted(nodes, key=lambda n: -n.path.count(b"/")):
        if node.kind in ("dir", "file"):
            os.chmod(base + b"/" + node.path, node.mode)
    return top


def _dropped(path: bytes) -> bool:
    return changes.dropped(f"{ROOT}/{os.fsdecode(path)}", ROOT, TEST_ROOTS)


def expectation(nodes: list[Node], docker: bool = False) -> tuple[set[str], set[bytes]]:
    """(the reasons a carry may give, empty when it must carry; the paths it must carry then).

    The local carry counts and checks the names of every entry it reads (a dropped one included);
    the docker carry those it carries, and sees no sparseness (a tar holds a file's bytes)."""
    seen = [n for n in nodes if not any(_dropped(a) for a in _ancestors(n.path))]
    kept = [n for n in seen if not _dropped(n.path)]
    reasons: set[str] = set()
    if len(kept if docker else seen) > BOUNDS.max_entries:
        reasons.add("too_many_entries")
    total = 0
    for node in kept if docker else seen:
        if node.path.count(b"/") + 1 > BOUNDS.max_depth:
            reasons.add("too_deep")
        if len(ROOT) + 1 + len(node.path) > BOUNDS.max_path_bytes:
            reasons.add("path_too_long")
    by_path = {n.path: n for n in nodes}
    for node in kept:
        real = by_path[node.target] if node.kind == "hardlink" else node
        if node.kind in ("fifo", "socket"):
            reasons.add("special_file")
        elif node.kind == "dir" and node.mode & 0o500 != 0o500:
            reasons.add("unreadable")
        elif real.kind == "file":
            if not real.mode & 0o400:
                reasons.add("unreadable")
            elif real.size > BOUNDS.max_file_bytes:
                reasons.add("file_too_large")
            elif real.sparse and real.size > BOUNDS.sparse_slack and not docker:
                reasons.add("sparse_file")
            total += real.size
    if total > BOUNDS.max_total_bytes:
        reasons.add("too_large")
    return reasons, {n.path for n in kept}


def _ancestors(path: bytes) -> list[bytes]:
    parts = path.split(b"/")
    return [b"/".join(parts[:i]) for i in range(1, len(parts))]


def listing(top: Path) -> dict[bytes, tuple[str, bytes]]:
    """Every entry below ``top`` (never followed): relative path -> (kind, content or link target)."""
    out: dict[bytes, tuple[str, bytes]] = {}
    base = os.fsencode(top)
    stack = [base]
    while stack:
        directory = stack.pop()
        for name in os.listdir(directory):
            path = directory + b"/" + name
            rel = path[len(base) + 1 :]
            mode = os.lstat(path).st_mode
            if stat.S_ISDIR(mode):
                out[rel] = ("dir", b"")
                stack.append(path)
            elif stat.S_ISLNK(mode):
                out[rel] = ("symlink", os.readlink(path))
            elif stat.S_ISREG(mode):
                out[rel] = ("file", b"%d" % os.lstat(path).st_size)
            else:
                out[rel] = ("special", b"")
    return out
