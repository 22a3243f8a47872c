"""write_image_dir end to end: toolz's image builds on the local backend, its tests run inside with the
network off, and no archive of toolz (the original source) is left anywhere in it."""

from __future__ import annotations

from pathlib import Path

from synth_sources import make_sdist

from ares.factory.image_dir import write_image_dir
from ares.factory.project import resolve_project
from ares.sandbox.local.images import image_sandbox, local_builder

PROBE = """set -e
echo "head=$(git rev-parse HEAD) commits=$(git rev-list --all | wc -l) st=$(git status --porcelain | wc -l)"
python -m pytest -q -x -p no:cacheprovider toolz/tests/test_functoolz.py 2>&1 | tail -1
python -c 'import toolz, sys; print("import", toolz.__file__)'
echo "archives=$(find / -xdev \\( -name 'toolz-*.tar.gz' -o -name 'toolz-*.whl' \\) 2>/dev/null | wc -l)"
echo "bundle=$(ls /tmp | grep -c bundle || true) pipcache=$(ls /root/.cache/pip 2>/dev/null | wc -l)"
"""


async def test_the_toolz_image_runs_its_tests_offline_and_holds_no_archive(
    clones: dict[str, Path], tmp_path: Path
) -> None:
    project = await resolve_project(
        str(make_sdist(clones["toolz"], tmp_path, "toolz", "1.2.0")), tmp_path / "w"
    )
    image_dir = write_image_dir(project, tmp_path / "image")
    assert sorted(p.name for p in image_dir.iterdir()) == ["Dockerfile", "project.bundle"]
    image = await local_builder().build(image_dir, tags=("localhost/ares-test/synth-toolz:1.2.0",))
    sandbox = image_sandbox(image)
    assert sandbox.spec.network is False
    await sandbox.start()
    try:
        result = await sandbox.exec(PROBE, cwd="/testbed", timeout_s=300)
    finally:
        await sandbox.stop()
    assert result.exit_code == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"head={project.base_commit} commits=1 st=0"
    assert " passed" in lines[1] and "failed" not in lines[1], result.stdout
    assert lines[2] == "import /testbed/toolz/__init__.py"
    assert lines[3:] == ["archives=0", "bundle=0 pipcache=0"]
