"""``DockerSandbox.fork_verifier``: a fresh container of the pristine image that receives only the
agent's changes below /testbed (minus dropped paths), with read-only host binds and no network.

The agent is hostile here: links out of /testbed and to /proc, a hard link to /etc/shadow, FIFOs,
names with newlines, setuid bits, a file replaced by a directory (which Podman's own change list
cannot even report), a /testbed replaced by a symlink or deleted as a whole.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

import pytest

from ares.errors import OutputRefusedError
from ares.sandbox import SandboxSpec
from ares.sandbox.base import BindMount, ImageSpec
from ares.sandbox.capabilities import Capability, declared
from ares.sandbox.docker import DockerSandbox, DockerSandboxFactory
from ares.sandbox.docker.sandbox import BoundFork
from ares.tasks.swe.changes import dropped

IMAGE = """\
FROM localhost/ares-debian:bookworm
RUN mkdir -p /testbed/pkg /testbed/tests /testbed/olddir/sub /testbed/.git/hooks /testbed/swap \\
 && echo 'VALUE = 1' > /testbed/pkg/lib.py && echo old > /testbed/old.py \\
 && echo deep > /testbed/olddir/sub/f && echo image-conftest > /testbed/conftest.py \\
 && echo image-tests-conftest > /testbed/tests/conftest.py && echo t > /testbed/tests/test_a.py \\
 && echo '[core]' > /testbed/.git/config && echo image-swap > /testbed/swap/keep.txt \\
 && echo image-swap-conftest > /testbed/swap/conftest.py && echo file > /testbed/becomes_dir \\
 && ln -s pkg /testbed/pkglink
WORKDIR /testbed
"""
DROP = partial(dropped, workdir="/testbed")


@pytest.fixture(scope="module")
def image_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    context = tmp_path_factory.mktemp("verifier-fork-image")
    (context / "Dockerfile").write_text(IMAGE)
    return context


@pytest.fixture
async def agent(factory: DockerSandboxFactory, image_dir: Path) -> AsyncIterator[DockerSandbox]:
    sandbox = factory(SandboxSpec(image=ImageSpec(dockerfile_dir=image_dir), workdir="/testbed"))
    await sandbox.start()
    yield sandbox
    await sandbox.stop()


async def _fork(agent: DockerSandbox, script: str, tmp_path: Path) -> BoundFork:
    done = await agent.exec(script)
    assert done.ok, done.stderr
    scripts = agent.host_dir("scripts")
    (scripts / "eval.sh").write_text("echo from-host\n")
    fork = await agent.fork_verifier(outputs=("/testbed",), binds=[BindMount(scripts, "/tests")], drop=DROP)
    await fork.sandbox.start()
    return fork


async def _sh(fork: BoundFork, command: str) -> str:
    result = await fork.sandbox.exec(command, cwd="/")
    assert result.ok, (command, result.stderr)
    return result.stdout


def test_the_docker_backend_declares_the_verifier_fork() -> None:
    assert Capability.VERIFIER_FORK in declared(DockerSandbox(SandboxSpec()))


async def test_changes_and_deletions_reach_the_fork_dropped_paths_keep_the_image(
    agent: DockerSandbox, tmp_path: Path
) -> None:
    script = """set -e
    echo 'VALUE = 2' > pkg/lib.py && mkdir -p new/dir && echo n > new/dir/f && rm old.py && rm -rf olddir
    printf '#!/bin/sh\\n' > run.sh && chmod 4755 run.sh && ln -s pkg/lib.py rel-link
    echo forged > conftest.py && echo forged > .git/config && rm tests/conftest.py && echo pyc > pkg/x.pyc
    rm -rf swap && mkdir swap && echo agent-swap > swap/new.txt
    echo outside > /etc/agent-marker && (sleep 600 &) && echo nohup > /tmp/agent-was-here
    """
    fork = await _fork(agent, script, tmp_path)
    try:
        assert await _sh(fork, "cat /testbed/pkg/lib.py /testbed/new/dir/f") == "VALUE = 2\nn\n"
        gone = await fork.sandbox.exec("ls /testbed/old.py /testbed/olddir /testbed/pkg/x.pyc", cwd="/")
        assert gone.stderr.count("No such file") == 3
        assert (
            await _sh(fork, "stat -c %a /testbed/run.sh; readlink /testbed/rel-link") == "755\npkg/lib.py\n"
        )
        kept = "cat /testbed/conftest.py /testbed/.git/config /testbed/tests/conftest.py"
        assert await _sh(fork, kept) == "image-conftest\n[core]\nimage-tests-conftest\n"
        # A replaced dir: the agent's content, minus the image's files, but the dropped conftest.py stays.
        assert await _sh(fork, "ls /testbed/swap | sort") == "conftest.py\nnew.txt\n"
        # Nothing else of the agent's container: no marker, no process; the bind is read-only.
        probe = await fork.sandbox.exec(
            "ls /etc/agent-marker /tmp/agent-was-here; cat /proc/[0-9]*/cmdline", cwd="/"
        )
        assert probe.stderr.count("No such file") == 2 and "sleep\x00600" not in probe.stdout
        assert await _sh(fork, "cat /tests/eval.sh") == "echo from-host\n"
        write = await fork.sandbox.exec("echo x > /tests/eval.sh", cwd="/")
        assert not write.ok and "Read-only" in write.stderr
        assert (await _sh(fork, "cat /proc/net/dev")).count(":") == 1  # lo only: no network
        assert "/etc/agent-marker" in fork.outside.paths
    finally:
        await fork.sandbox.stop()


async def test_hostile_links_hard_links_and_names_stay_in_the_fork(
    agent: DockerSandbox, tmp_path: Path
) -> None:
    script = """set -e
    ln -s / root-link && ln -s /etc/shadow shadow-link && ln -s /proc/self/root proc-link
    ln /etc/shadow hard-shadow
    echo nl > "$(printf 'new\\nline')"
    rm becomes_dir && mkdir becomes_dir && echo inside > becomes_dir/x
    rm pkglink && mkdir pkglink && echo real > pkglink/own
    """
    before = await agent.exec("sha256sum /etc/shadow", cwd="/")
    fork = await _fork(agent, script, tmp_path)
    try:
        links = "readlink /testbed/root-link /testbed/shadow-link /testbed/proc-link"
        assert await _sh(fork, links) == "/\n/etc/shadow\n/proc/self/root\n"
        hard = await _sh(fork, "stat -c '%h %F' /testbed/hard-shadow; sha256sum /etc/shadow")
        assert hard.splitlines()[0] == "1 regular file" and hard.splitlines()[1] == before.stdout.strip()
        await _sh(fork, "echo changed > /testbed/hard-shadow")
        assert await _sh(fork, "sha256sum /etc/shadow") == before.stdout  # a copy, not a link
        assert await _sh(fork, "cat /testbed/new*line") == "nl\n"
        assert await _sh(fork, "cat /testbed/becomes_dir/x; ls /testbed/pkglink") == "inside\nown\n"
        assert await _sh(fork, "test ! -L /testbed/pkglink && cat /testbed/pkg/lib.py") == "VALUE = 1\n"
    finally:
        await fork.sandbox.stop()


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ("mkfifo pipe", "special_file"),
        ("mkdir locked && echo secret > locked/f && chmod 000 locked", "unreadable"),
    ],
)
async def test_fifos_and_unreadable_dirs_are_refused(
    agent: DockerSandbox, tmp_path: Path, script: str, reason: str
) -> None:
    """Refused with a named reason (``OutputRefusedError``, which the verifier scores 0)."""
    with pytest.raises(OutputRefusedError) as refused:
        fork = await _fork(agent, script, tmp_path)
        await fork.sandbox.stop()
    assert refused.value.reason == reason


async def test_a_testbed_replaced_by_a_symlink_is_not_followed(agent: DockerSandbox, tmp_path: Path) -> None:
    fork = await _fork(
        agent, "echo 'VALUE = 3' > pkg/lib.py && cd / && mv testbed tb && ln -s /etc testbed", tmp_path
    )
    try:
        assert (
            await _sh(fork, "test -d /testbed && ! test -L /testbed && cat /testbed/pkg/lib.py")
            == "VALUE = 1\n"
        )
        assert await _sh(fork, "ls /testbed | grep -c passwd || true") == "0\n"
        assert any(p.startswith("/testbed (not carried") for p in fork.outside.paths)
    finally:
        await fork.sandbox.stop()


async def test_a_deleted_testbed_keeps_only_the_dropped_paths(agent: DockerSandbox, tmp_path: Path) -> None:
    fork = await _fork(agent, "cd / && rm -rf /testbed", tmp_path)
    try:
        listing = await _sh(fork, "cd /testbed && find . -type f | sort")
        expected = ["./.git/config", "./conftest.py", "./swap/conftest.py", "./tests/conftest.py"]
        assert listing.split() == expected
    finally:
        await fork.sandbox.stop()
