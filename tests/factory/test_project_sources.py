"""The source kinds' edges: hostile sdists are refused before anything lands outside the tree, a PyPI
requirement goes through pip's own configuration (find-links and no index here: offline), and an
unreachable index is a clear error."""

from __future__ import annotations

import io
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest
from synth_sources import git

from ares.errors import TaskError
from ares.factory.project import resolve_project

#: A project whose PEP 517 backend is in the tree, so pip prepares its metadata with no index at all.
DEMO = {
    "pyproject.toml": """\
        [build-system]
        requires = []
        build-backend = "backend"
        backend-path = ["."]

        [project]
        name = "synthdemo"
        version = "0.3.1"
        license = {text = "Apache-2.0"}

        [project.optional-dependencies]
        test = ["pytest>=7", "pytest-cov", "hypothesis"]
        """,
    "backend.py": """\
        import os

        def get_requires_for_build_wheel(config_settings=None):
            return []

        def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
            info = os.path.join(metadata_directory, "synthdemo-0.3.1.dist-info")
            os.makedirs(info)
            with open(os.path.join(info, "METADATA"), "w") as f:
                f.write("Metadata-Version: 2.1\\nName: synthdemo\\nVersion: 0.3.1\\n")
            return "synthdemo-0.3.1.dist-info"
        """,
    "synthdemo/__init__.py": "def double(x):\n    return 2 * x\n",
    "synthdemo/tests/__init__.py": "",
    "synthdemo/tests/test_double.py": """\
        from synthdemo import double

        def test_double():
            assert double(2) == 4
        """,
}


def write_tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return path


def demo_sdist(dest: Path) -> Path:
    members = []
    for rel, text in DEMO.items():
        data = textwrap.dedent(text).encode()
        members.append((tarfile.TarInfo(f"synthdemo-0.3.1/{rel}"), data))
    return write_tar(dest / "synthdemo-0.3.1.tar.gz", members)


def link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, b""


@pytest.mark.parametrize(
    "member",
    [
        (tarfile.TarInfo("pkg-1.0/../../escaped.txt"), b"out"),
        (tarfile.TarInfo("/tmp/ares-synth-absolute.txt"), b"out"),
        link("pkg-1.0/pkg/evil", "../../../../escaped.txt"),
        link("pkg-1.0/pkg/evil", "/etc/passwd"),
        link("pkg-1.0/pkg/hard", "../../outside", tarfile.LNKTYPE),
    ],
    ids=["dotdot", "absolute", "symlink-out", "symlink-absolute", "hardlink-out"],
)
async def test_a_hostile_sdist_is_refused(member: tuple[tarfile.TarInfo, bytes], tmp_path: Path) -> None:
    ok = (tarfile.TarInfo("pkg-1.0/pkg/__init__.py"), b"")
    archive = write_tar(tmp_path / "pkg-1.0.tar.gz", [ok, member])
    with pytest.raises(TaskError, match=r"pkg-1\.0\.tar\.gz: unsafe sdist member refused"):
        await resolve_project(str(archive), tmp_path / "work" / "deep")
    assert not (tmp_path / "escaped.txt").exists() and not Path("/tmp/ares-synth-absolute.txt").exists()
    assert not (tmp_path / "work" / "deep" / "repo" / "pkg").exists()


@pytest.mark.parametrize("name", ["../escaped.txt", "/abs.txt"])
async def test_a_hostile_zip_sdist_is_refused(name: str, tmp_path: Path) -> None:
    archive = tmp_path / "pkg-1.0.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("pkg-1.0/pkg/__init__.py", "")
        zf.writestr(name, "out")
    with pytest.raises(TaskError, match=r"pkg-1\.0\.zip: unsafe sdist member refused"):
        await resolve_project(str(archive), tmp_path / "work")


async def test_a_pypi_requirement_is_fetched_through_pips_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    links = tmp_path / "links"
    links.mkdir()
    demo_sdist(links)
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    project = await resolve_project("synthdemo==0.3.1", tmp_path / "work")
    assert (project.name, project.version, project.licence) == ("synthdemo", "0.3.1", "Apache-2.0")
    assert (project.package_dirs, project.test_paths) == (("synthdemo",), ("synthdemo/tests",))
    assert project.test_deps == ("pytest>=7", "hypothesis")
    assert git(project.root, "rev-list", "--all").split() == [project.base_commit]
    newest = await resolve_project("synthdemo", tmp_path / "work2")
    assert newest.base_commit == project.base_commit


async def test_an_unreachable_index_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:1/")
    monkeypatch.setenv("PIP_RETRIES", "0")
    with pytest.raises(TaskError, match=r"pip could not download the sdist of toolz==1\.2\.0 \(offline"):
        await resolve_project("toolz==1.2.0", tmp_path / "work")


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("no/such/dir", "no such file or directory, and not a PyPI requirement"),
        ("README.md", "not an sdist"),
    ],
)
async def test_a_bad_source_is_a_clear_error(
    source: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "README.md").write_text("hi\n")
    with pytest.raises(TaskError, match=message):
        await resolve_project(source, tmp_path / "work")


async def test_a_tree_without_tests_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "__init__.py").write_text("")
    with pytest.raises(TaskError, match="no tests found"):
        await resolve_project(str(tmp_path / "src"), tmp_path / "work")
