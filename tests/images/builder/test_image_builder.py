"""The local image builder on real sandboxes: layers, cache reuse, config, errors, concurrency."""

from __future__ import annotations

import asyncio
import tarfile
from pathlib import Path

import pytest

from ares.errors import ImageBuildError
from ares.images.build.builder import ImageBuilder
from ares.images.build.dockerfile import DockerfileError
from ares.images.build.standins import host_python_version
from ares.images.cache import ImageCache
from ares.sandbox.local.images import image_sandbox, local_builder

HOST_PY = ".".join((host_python_version() or "3.11").split(".")[:2])


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture
def builder(tmp_path: Path) -> ImageBuilder:
    return local_builder(ImageCache(tmp_path / "cache"))


DOCKERFILE = f"""FROM python:{HOST_PY}-slim
ARG GREETING=hello
ENV APP_HOME=/app MESSAGE="${{GREETING}} world"
RUN echo "$GREETING from run" > /greeting && mkdir -p /usr/local/share/demo \\
    && echo x > /usr/local/share/demo/x
COPY app.py lib/ $APP_HOME/
WORKDIR /app
RUN <<EOF
echo made-by-heredoc > /app/here.txt
EOF
LABEL org.example.team="rl infra"
EXPOSE 8000/tcp
USER nobody
CMD ["python", "app.py"]
"""


async def test_build_runs_instructions_and_sets_config(builder: ImageBuilder, tmp_path: Path) -> None:
    ctx = write(
        tmp_path / "ctx",
        {
            "Dockerfile": DOCKERFILE,
            "app.py": "print('app ok')\n",
            "lib/util.py": "X = 1\n",
            "lib/.hidden": "h",
        },
    )
    image = await builder.build(ctx, build_args={"GREETING": "hi"})
    assert not image.cached
    assert image.config.env["MESSAGE"] == "hi world"
    assert image.config.workdir == "/app" and image.config.user == "nobody"
    assert image.config.cmd == ("python", "app.py")
    assert image.config.labels == {"org.example.team": "rl infra"}
    assert image.config.exposed_ports == ("8000/tcp",)
    async with image_sandbox(image) as sandbox:
        checks = {
            "cat /greeting": "hi from run",
            "cat /usr/local/share/demo/x": "x",
            "python app.py": "app ok",
            "cat /app/util.py /app/.hidden": "X = 1\nh",
            "cat here.txt": "made-by-heredoc",
            "pwd": "/app",
            "id -un": "nobody",
            "echo $MESSAGE": "hi world",
            "stat -c %U /app/app.py": "root",
        }
        for cmd, expected in checks.items():
            result = await sandbox.exec(cmd)
            assert result.ok, (cmd, result)
            assert result.stdout.strip() == expected, cmd
        # ARG values are build-time only.
        assert (await sandbox.exec("echo ${GREETING:-unset}")).stdout.strip() == "unset"
        assert (await sandbox.exec("id -u", user="root")).stdout.strip() == "0"
    assert image.log_path is not None and "Step 4/11 : RUN" in image.log_path.read_text()


async def test_rebuild_reuses_layers_up_to_the_changed_step(builder: ImageBuilder, tmp_path: Path) -> None:
    dockerfile = (
        f"FROM python:{HOST_PY}\nRUN echo one > /one\nCOPY data.txt /data.txt\nRUN cat /data.txt > /copy\n"
    )
    ctx = write(tmp_path / "ctx", {"Dockerfile": dockerfile, "data.txt": "v1"})
    first = await builder.build(ctx)
    again = await builder.build(ctx)
    assert again.cached and again.key == first.key
    (ctx / "data.txt").write_text("v2")
    changed = await builder.build(ctx)
    cached = {step.instruction: step.cached for step in changed.steps}
    assert cached["RUN echo one > /one"] is True
    assert cached["COPY data.txt /data.txt"] is False
    assert cached["RUN cat /data.txt > /copy"] is False
    async with image_sandbox(changed) as sandbox:
        assert (await sandbox.read_file("/copy")) == b"v2"
    async with image_sandbox(first) as sandbox:  # the old image is still intact
        assert (await sandbox.read_file("/copy")) == b"v1"


async def test_concurrent_builds_of_one_image_build_once(tmp_path: Path) -> None:
    ctx = write(tmp_path / "ctx", {"Dockerfile": f"FROM python:{HOST_PY}\nRUN echo $RANDOM > /r\n"})
    cache = ImageCache(tmp_path / "cache")
    images = await asyncio.gather(*(local_builder(cache).build(ctx) for _ in range(4)))
    assert len({image.key for image in images}) == 1
    runs = [s for image in images for s in image.steps if s.instruction.startswith("RUN") and not s.cached]
    assert len(runs) == 1
    contents = set()
    for image in images:
        async with image_sandbox(image) as sandbox:
            contents.add(await sandbox.read_file("/r"))
    assert len(contents) == 1


async def test_deletions_in_a_layer_hide_lower_files(builder: ImageBuilder, tmp_path: Path) -> None:
    dockerfile = f"FROM python:{HOST_PY}\nRUN mkdir /d && touch /d/a /d/b\nRUN rm /d/a && rm -rf /etc/ssl\n"
    image = await builder.build(write(tmp_path / "ctx", {"Dockerfile": dockerfile}))
    async with image_sandbox(image) as sandbox:
        assert (await sandbox.exec("ls /d")).stdout.split() == ["b"]
        assert not (await sandbox.exec("test -e /etc/ssl")).ok


async def test_failed_run_names_the_step_and_keeps_no_layer(builder: ImageBuilder, tmp_path: Path) -> None:
    ctx = write(tmp_path / "ctx", {"Dockerfile": f"FROM python:{HOST_PY}\nRUN echo about to fail; exit 7\n"})
    with pytest.raises(ImageBuildError, match="exited with code 7") as info:
        await builder.build(ctx)
    assert "about to fail" in str(info.value)
    assert not any((builder.cache.root / "tmp").glob("*/*"))  # staging cleaned up


@pytest.mark.parametrize(
    ("dockerfile", "error", "message"),
    [
        ("FROM python:2.7\n", ImageBuildError, "needs Python 2.7 but the host"),
        (f"FROM python:{HOST_PY}\nCOPY --from=build /a /a\n", ImageBuildError, "FROM build: cannot pull"),
        (f"FROM python:{HOST_PY}\nCOPY missing.txt /x\n", DockerfileError, "'missing.txt' not found"),
        (f"FROM python:{HOST_PY}\nADD git@github.com:x/y /x\n", DockerfileError, "RUN git clone"),
        (f"FROM python:{HOST_PY}\nCOPY ../outside /x\n", DockerfileError, "outside the build context"),
        (f"FROM python:{HOST_PY}\nSHELL /bin/bash\n", DockerfileError, "JSON form"),
        (f"FROM python:{HOST_PY} AS a\nFROM python:{HOST_PY} AS a\n", DockerfileError, "used twice"),
    ],
)
async def test_unsupported_input_gets_a_clear_error(
    builder: ImageBuilder, tmp_path: Path, dockerfile: str, error: type[Exception], message: str
) -> None:
    ctx = write(tmp_path / "ctx", {"Dockerfile": dockerfile})
    with pytest.raises(error, match=message):
        await builder.build(ctx)


async def test_dockerignore_add_archive_and_chmod(builder: ImageBuilder, tmp_path: Path) -> None:
    ctx = write(
        tmp_path / "ctx",
        {
            "Dockerfile": f"FROM python:{HOST_PY}\nCOPY --chmod=755 . /src/\nADD bundle.tar.gz /opt/b/\n",
            ".dockerignore": "secrets/\n**/*.pyc\n!keep.pyc\nbundle.tar.gz\n",
            "tool.sh": "#!/bin/sh\necho tool\n",
            "secrets/token": "s3cret",
            "pkg/mod.pyc": "junk",
            "keep.pyc": "kept",
            "payload/inner.txt": "inside the archive",
        },
    )
    with tarfile.open(ctx / "bundle.tar.gz", "w:gz") as tar:
        tar.add(ctx / "payload", arcname="payload")
    (ctx / ".dockerignore").write_text("secrets/\n**/*.pyc\n!keep.pyc\n")
    image = await builder.build(ctx)
    async with image_sandbox(image) as sandbox:
        assert (await sandbox.exec("/src/tool.sh")).stdout == "tool\n"
        assert not (await sandbox.exec("test -e /src/secrets/token")).ok
        assert not (await sandbox.exec("test -e /src/pkg/mod.pyc")).ok
        assert (await sandbox.read_file("/src/keep.pyc")) == b"kept"
        assert (await sandbox.read_file("/opt/b/payload/inner.txt")) == b"inside the archive"


async def test_build_env_reaches_run_steps_but_not_keys_or_image(tmp_path: Path) -> None:
    ctx = write(
        tmp_path / "ctx", {"Dockerfile": f"FROM python:{HOST_PY}\nRUN echo ${{PIP_INDEX_URL:-none}} > /m\n"}
    )
    cache = ImageCache(tmp_path / "cache")
    image = await local_builder(cache, build_env={"PIP_INDEX_URL": "http://mirror.invalid/simple"}).build(ctx)
    async with image_sandbox(image) as sandbox:
        assert (await sandbox.read_file("/m")) == b"http://mirror.invalid/simple\n"
        assert (await sandbox.exec("echo ${PIP_INDEX_URL:-none}")).stdout == "none\n"
    assert (await local_builder(cache, build_env={}).build(ctx)).cached


async def test_from_a_tagged_image_in_the_cache(builder: ImageBuilder, tmp_path: Path) -> None:
    parent = write(
        tmp_path / "parent", {"Dockerfile": f"FROM python:{HOST_PY}\nENV LEVEL=parent\nRUN touch /p\n"}
    )
    await builder.build(parent, tags=("team/base:1",))
    child = write(tmp_path / "child", {"Dockerfile": "FROM team/base:1\nRUN touch /c\n"})
    image = await builder.build(child)
    assert image.config.env["LEVEL"] == "parent"
    async with image_sandbox(image) as sandbox:
        assert (await sandbox.exec("test -e /p && test -e /c")).ok
    listed = {tag for record in builder.cache.images() for tag in record.tags}
    assert "team/base:1" in listed
