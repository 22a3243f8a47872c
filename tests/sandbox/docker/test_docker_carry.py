"""``carry.py`` on hand-made archives: the rules an engine's archive of the agent's dir must pass
(names, duplicates, bounds) and the plan for hard links, FIFOs and dropped paths."""

from __future__ import annotations

import io
import tarfile

import pytest

from ares.sandbox.docker.carry import (
    CarryLimits,
    CarryRefused,
    Listing,
    list_archive,
    plan_carry,
    write_carry,
)

ROOT = "/testbed"


def _tar(*members: tuple[str, bytes | str | None]) -> tarfile.TarFile:
    """A tar of ``(name, content)``: bytes a file, None a dir, ``"->x"`` a symlink, ``"=>x"`` a hard
    link, ``"|"`` a FIFO."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, content in members:
            info = tarfile.TarInfo(name)
            if content is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            elif isinstance(content, bytes):
                info.size, info.mode = len(content), 0o6755
                tar.addfile(info, io.BytesIO(content))
            elif content == "|":
                info.type = tarfile.FIFOTYPE
                tar.addfile(info)
            else:
                info.type = tarfile.SYMTYPE if content.startswith("->") else tarfile.LNKTYPE
                info.linkname = content[2:]
                tar.addfile(info)
    buf.seek(0)
    return tarfile.open(fileobj=buf, mode="r:")


DEFAULT = CarryLimits()


def _list(tar: tarfile.TarFile, limits: CarryLimits = DEFAULT) -> Listing:
    return list_archive(tar, ROOT, lambda p: p.endswith("/conftest.py"), limits, keep_members=True)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("/testbed/x", "absolute"),
        ("testbed/../etc/x", "'..'"),
        ("other/x", "outside"),
    ],
)
def test_names_that_could_leave_the_dir_are_refused(name: str, why: str) -> None:
    with pytest.raises(CarryRefused, match=why):
        _list(_tar(("testbed", None), (name, b"x")))


def test_duplicates_and_bounds_are_refused() -> None:
    with pytest.raises(CarryRefused, match="twice"):
        _list(_tar(("testbed", None), ("testbed/a", b"1"), ("testbed/a", b"2")))
    with pytest.raises(CarryRefused, match="more than 2 entries"):
        _list(_tar(("testbed", None), ("testbed/a", b"1"), ("testbed/b", b"2")), CarryLimits(max_members=2))
    agent = _tar(("testbed", None), ("testbed/big", b"x" * 100))
    listing = _list(agent)
    plan = plan_carry(listing, Listing(), ROOT)
    with pytest.raises(CarryRefused, match="larger than 10 bytes"):
        write_carry(agent, listing, plan, io.BytesIO(), CarryLimits(max_carry_bytes=10))


def test_hard_links_become_copies_fifos_are_not_carried_setuid_is_cleared() -> None:
    agent = _tar(
        ("testbed", None), ("testbed/a", b"same"), ("testbed/b", "=>testbed/a"), ("testbed/p", "|"),
        ("testbed/l", "->/etc/shadow"), ("testbed/conftest.py", b"forged"),
    )  # fmt: skip
    image = _tar(("testbed", None), ("testbed/p", b"was a file"), ("testbed/conftest.py", b"image"))
    listing = _list(agent)
    plan = plan_carry(listing, _list(image), ROOT)
    assert plan.delete == ("/testbed/p",) and plan.carry == ("/testbed/a", "/testbed/b", "/testbed/l")
    assert plan.skipped_special == 1
    out = io.BytesIO()
    write_carry(agent, listing, plan, out, CarryLimits())
    out.seek(0)
    with tarfile.open(fileobj=out) as written:
        members = {m.name: m for m in written}
        assert set(members) == {"testbed/a", "testbed/b", "testbed/l"}
        assert members["testbed/b"].isreg() and written.extractfile(members["testbed/b"]).read() == b"same"  # type: ignore[union-attr]
        assert members["testbed/a"].mode == 0o755 and members["testbed/l"].linkname == "/etc/shadow"


def test_a_dir_holding_a_dropped_file_is_emptied_not_deleted() -> None:
    image = _tar(
        ("testbed", None), ("testbed/t", None), ("testbed/t/conftest.py", b"c"), ("testbed/t/x", b"x")
    )
    plan = plan_carry(_list(_tar(("testbed", None))), _list(image), ROOT)
    assert plan.delete == ("/testbed/t/x",) and plan.carry == ()
    unchanged = plan_carry(_list(image), _list(image), ROOT)
    assert unchanged.empty
