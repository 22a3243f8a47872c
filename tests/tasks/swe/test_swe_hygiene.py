"""No leaked answers: a named instance image whose /testbed carries the fix (a later commit, a tag, a
remote ref, a stash, reflogs) reaches the agent with only the history up to ``base_commit``.

The leaky image is the toolz fixture image plus the gold fix committed on top, as an official image
that cloned the whole project would carry it. The agent then probes with git, pip and the filesystem.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from ares.policies import make_policy
from ares.presets import make
from ares.rollout.runner import run_episode
from ares.sandbox.local.images import image_sandbox, local_builder
from ares.tasks.swe.harness import swebench_available
from ares.tasks.swe.hygiene import clean_image, hygiene_script

FIXTURES = Path(__file__).parents[2] / "fixtures" / "swe"
INSTANCES = FIXTURES / "instances.jsonl"
TOOLZ = "pytoolz__toolz-90001"
LEAKY = "localhost/ares-test/leaky-toolz:1"
LEAKY_DOCKERFILE = f"""FROM ares-swe/toolz:1.2.0
COPY fix.patch /tmp/fix.patch
RUN cd /testbed && git checkout -q {TOOLZ} && git apply /tmp/fix.patch \\
 && git -c user.name=dev -c user.email=dev@example.org commit -qam "Fix tail (the answer)" \\
 && mkdir -p /probe && git rev-parse HEAD:toolz/itertoolz.py > /probe/fixed-blob \\
 && git rev-parse HEAD > /probe/fix-commit && git tag v-fixed \\
 && git update-ref refs/remotes/origin/main HEAD \\
 && git remote add origin https://github.com/pytoolz/toolz.git \\
 && git checkout -q --detach HEAD~1 && git apply /tmp/fix.patch \\
 && git -c user.name=dev -c user.email=dev@example.org stash -q && rm /tmp/fix.patch
WORKDIR /testbed
"""
PROBE = """cd /testbed
echo "all=$(git log --all --format=%H | wc -l)"
echo "refs=$(git for-each-ref | wc -l)"
echo "tags=$(git tag | wc -l) remotes=$(git remote | wc -l) stash=$(git stash list | wc -l)"
echo "reflog=$(git reflog 2>/dev/null | wc -l)"
echo "lost=$(git fsck --lost-found --unreachable --no-reflogs 2>/dev/null | wc -l)"
git cat-file -e "$(cat /probe/fixed-blob)" 2>/dev/null && echo "blob=present" || echo "blob=absent"
git cat-file -e "$(cat /probe/fix-commit)" 2>/dev/null && echo "commit=present" || echo "commit=absent"
timeout 60 pip download --no-deps -q -d /tmp/dl toolz==1.2.0 >/dev/null 2>&1 \\
  && echo "pip=fetched" || echo "pip=failed"
echo "archives=$(find / -xdev \\( -name 'toolz-*.whl' -o -name 'toolz-*.tar.gz' \\) 2>/dev/null | wc -l)"
"""

pytestmark = pytest.mark.skipif(not swebench_available(), reason="needs swebench + unidiff (ares[swe])")


@pytest.fixture(scope="module")
def leaky_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    row = next(json.loads(line) for line in INSTANCES.read_text().splitlines() if TOOLZ in line)
    context = tmp_path_factory.mktemp("leaky")
    (context / "Dockerfile").write_text(LEAKY_DOCKERFILE)
    (context / "fix.patch").write_text(row["patch"])

    async def build() -> None:
        builder = local_builder()
        await builder.build(FIXTURES / "images" / "toolz", tags=("ares-swe/toolz:1.2.0",))
        await builder.build(context, tags=(LEAKY,))

    asyncio.run(build())
    return LEAKY


def _probe_values(stdout: str) -> dict[str, str]:
    pairs = (item.split("=", 1) for line in stdout.split() for item in [line] if "=" in item)
    return dict(pairs)


async def test_the_leaky_image_itself_leaks(leaky_image: str) -> None:
    """The probe is not hollow: on the image as built, it finds the fix every way it looks."""
    sandbox = image_sandbox(await local_builder().from_name(leaky_image))
    await sandbox.start()
    try:
        seen = _probe_values((await sandbox.exec(PROBE, cwd="/testbed", timeout_s=120)).stdout)
    finally:
        await sandbox.stop()
    assert int(seen["all"]) > 1 and seen["tags"] == "1" and seen["remotes"] == "1" and seen["stash"] == "1"
    assert seen["blob"] == seen["commit"] == "present" and int(seen["reflog"]) > 0


async def test_a_named_image_reaches_the_agent_without_the_fix(leaky_image: str) -> None:
    async with make("swebench", path=INSTANCES, tasks=TOOLZ, image_template=leaky_image) as env:
        assert env.tasks[0].metadata["image"] == leaky_image
        await env.reset()
        assert env.sandbox is not None
        probe = await env.sandbox.exec(PROBE, cwd="/testbed", timeout_s=120)
        seen = _probe_values(probe.stdout)
        head = await env.sandbox.exec("git rev-parse HEAD", cwd="/testbed")
    assert head.stdout.strip() == env.tasks[0].metadata["base_commit"]
    assert seen == {
        "all": "1", "refs": "0", "tags": "0", "remotes": "0", "stash": "0", "reflog": "0", "lost": "0",
        "blob": "absent", "commit": "absent", "pip": "failed", "archives": "0",
    }, probe  # fmt: skip


async def test_the_oracle_still_resolves_on_the_cleaned_image(leaky_image: str) -> None:
    async with make("swebench", path=INSTANCES, tasks=TOOLZ, image_template=leaky_image) as env:
        result = await run_episode(env, make_policy("oracle"), index=0, task=0, seed=0)
    assert result.status == "finished" and result.reward == 1.0, result.record.get("error")


def test_the_clean_image_is_one_cached_dockerfile(tmp_path: Path) -> None:
    first = clean_image("swebench/sweb.eval.x86_64.a_1776_b-1:latest", "abc123", tmp_path)
    again = clean_image("swebench/sweb.eval.x86_64.a_1776_b-1:latest", "abc123", tmp_path)
    other = clean_image("swebench/sweb.eval.x86_64.a_1776_b-1:latest", "def456", tmp_path)
    assert first == again != other and first.dockerfile_dir is not None
    text = (first.dockerfile_dir / "Dockerfile").read_text()
    assert "FROM swebench/sweb.eval.x86_64.a_1776_b-1:latest\n" in text
    assert f"RUN {hygiene_script('abc123')}\n" in text
    assert "checkout -q --detach abc123" in text and "gc -q --prune=now" in text


async def test_a_base_commit_the_image_lacks_fails_the_build_clearly(
    leaky_image: str, tmp_path: Path
) -> None:
    row = next(json.loads(line) for line in INSTANCES.read_text().splitlines() if TOOLZ in line)
    row["base_commit"] = "0" * 40
    (tmp_path / "missing.jsonl").write_text(json.dumps(row) + "\n")
    async with make("swebench", path=tmp_path / "missing.jsonl", image_template=leaky_image) as env:
        result = await run_episode(env, make_policy("oracle"), index=0, task=0, seed=0)
    assert result.status == "errored"
    assert "0000000000" in json.dumps(result.record.get("error")), result.record.get("error")
