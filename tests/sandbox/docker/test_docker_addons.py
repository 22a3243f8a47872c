"""Add-on layers on the docker backend: a derived image per (add-on, image), built once from the
host's cached files; a container's writes to the add-on stay in that container."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from docker_engine_kit import BASE_IMAGE

from ares.sandbox.addons import AddonLayer
from ares.sandbox.base import ImageSpec, SandboxSpec


class CountingSource:
    def __init__(self, log: Path) -> None:
        self.log = log

    async def populate(self, dest: Path) -> None:
        with self.log.open("a") as out:
            out.write("fill\n")
        (dest / "bin").mkdir()
        (dest / "bin" / "tool").write_text("#!/bin/sh\necho tool-ran\n")
        (dest / "bin" / "tool").chmod(0o700)
        (dest / "data.txt").write_text("pristine\n")


async def test_a_docker_sandbox_gets_a_derived_image_built_once(factory: Any, tmp_path: Path) -> None:
    log = tmp_path / "fills.log"
    key = f"tool-{os.getpid()}-{tmp_path.name[-6:]}".lower()
    addon = AddonLayer(key=key, mount="/opt/ares/agents/tool", source=CountingSource(log))
    spec = SandboxSpec(image=ImageSpec(name=BASE_IMAGE), addons=(addon,))
    outputs = []
    for command in (
        "cd /opt/ares/agents/tool && bin/tool; echo forged > data.txt; ls -a",
        "cat /opt/ares/agents/tool/data.txt",
    ):
        box = factory(spec)
        await box.start()
        try:
            outputs.append((await box.exec(command)).stdout.split())
        finally:
            await box.stop()
    assert outputs[0] == ["tool-ran", ".", "..", "bin", "data.txt"]  # no build file copied in
    assert outputs[1] == ["pristine"]  # a new container starts from the derived image's files
    assert [tag.split(":")[0] for tag in factory.built] == [f"ares-addon/{key}"]  # derived once
    assert log.read_text().count("fill") == 1
    plain = factory(SandboxSpec(image=ImageSpec(name=BASE_IMAGE)))
    await plain.start()
    try:
        assert (await plain.exec("ls /opt/ares/agents/tool")).exit_code != 0  # the task image is untouched
    finally:
        await plain.stop()
