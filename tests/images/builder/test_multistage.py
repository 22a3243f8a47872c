"""Multi-stage builds on the host-python stand-in: stages, COPY --from a stage or a tagged image,
--target, and stages the target does not need left alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from ares.errors import ImageBuildError
from ares.images.build.builder import ImageBuilder
from ares.images.build.dockerfile import DockerfileError
from ares.images.build.standins import host_python_version
from ares.images.cache import ImageCache
from ares.sandbox.local.images import image_sandbox, local_builder

PY = ".".join((host_python_version() or "3.11").split(".")[:2])

MULTI = f"""ARG BASE=python:{PY}-slim
FROM $BASE AS build
WORKDIR /src
RUN mkdir -p out/sub && echo built > out/app.txt && echo nested > out/sub/n.txt \\
    && ln out/app.txt out/hard.txt && chown 65534 out/sub/n.txt
FROM $BASE AS broken
RUN echo this stage is not needed && exit 9
FROM $BASE
ARG BASE
RUN echo "$BASE" > /base-arg
COPY --from=build /src/out /opt/app/
COPY --from=0 /src/out/app.txt /single.txt
COPY --from=build /src/out/*.txt /globbed/
"""


@pytest.fixture
def builder(tmp_path: Path) -> ImageBuilder:
    return local_builder(ImageCache(tmp_path / "cache"))


def context(root: Path, dockerfile: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "Dockerfile").write_text(dockerfile)
    return root


async def test_two_stages_copy_from_a_stage_and_skip_the_unneeded_one(
    builder: ImageBuilder, tmp_path: Path
) -> None:
    lines: list[str] = []
    builder.on_log = lines.append
    image = await builder.build(context(tmp_path / "ctx", MULTI))
    assert any("skipping stages not needed by 2: broken" in line for line in lines)
    async with image_sandbox(image) as sandbox:
        checks = {
            "cat /opt/app/app.txt /opt/app/sub/n.txt": "built\nnested\n",
            "cat /single.txt": "built\n",
            "ls /globbed": "app.txt\nhard.txt\n",
            "cat /base-arg": f"python:{PY}-slim\n",
            "stat -c %u /opt/app/sub/n.txt": "65534\n",  # COPY --from keeps owners, as Docker does
            "stat -c %h /opt/app/app.txt": "2\n",  # the hardlink stays a hardlink
            "test -e /src || echo no-src": "no-src\n",
        }
        for command, expected in checks.items():
            assert (await sandbox.exec(command)).stdout == expected, command
    again = await builder.build(context(tmp_path / "ctx", MULTI))
    assert again.cached and again.key == image.key


async def test_target_builds_only_up_to_that_stage(builder: ImageBuilder, tmp_path: Path) -> None:
    image = await builder.build(context(tmp_path / "ctx", MULTI), target="build")
    assert image.config.workdir == "/src"
    async with image_sandbox(image) as sandbox:
        assert (await sandbox.exec("cat out/app.txt && test ! -e /opt/app")).stdout == "built\n"
    with pytest.raises(DockerfileError, match=r"target stage 'nope' not found.*stages: build, broken, 2"):
        await builder.build(context(tmp_path / "ctx", MULTI), target="nope")


async def test_copy_from_an_image_built_earlier_and_tagged(builder: ImageBuilder, tmp_path: Path) -> None:
    tools = context(
        tmp_path / "tools", f"FROM python:{PY}-slim\nRUN mkdir -p /opt/t && echo v1 > /opt/t/tool\n"
    )
    await builder.build(tools, tags=("team/tools:1",))
    app = context(
        tmp_path / "app", f"FROM python:{PY}-slim\nCOPY --from=team/tools:1 /opt/t/tool /usr/local/bin/\n"
    )
    image = await builder.build(app)
    async with image_sandbox(image) as sandbox:
        assert (await sandbox.read_file("/usr/local/bin/tool")) == b"v1\n"
    # A new build of the tagged image invalidates the COPY that read from it.
    (tools / "Dockerfile").write_text(
        f"FROM python:{PY}-slim\nRUN mkdir -p /opt/t && echo v2 > /opt/t/tool\n"
    )
    await builder.build(tools, tags=("team/tools:1",))
    rebuilt = await builder.build(app)
    assert not rebuilt.cached
    async with image_sandbox(rebuilt) as sandbox:
        assert (await sandbox.read_file("/usr/local/bin/tool")) == b"v2\n"


async def test_copy_from_a_missing_path_names_it(builder: ImageBuilder, tmp_path: Path) -> None:
    text = f"FROM python:{PY}-slim AS a\nRUN true\nFROM python:{PY}-slim\nCOPY --from=a /no/such /x\n"
    with pytest.raises(ImageBuildError, match=r"COPY --from: cannot read no/such"):
        await builder.build(context(tmp_path / "ctx", text))
