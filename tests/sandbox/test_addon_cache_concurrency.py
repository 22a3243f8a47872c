"""Many episodes of one process asking for the same cold add-on layer at once fill it once, and none
waits forever: waiting for the fill lock holds no worker thread that the filler itself needs."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ares.sandbox.addon_cache import content_dir, ensure_addon
from ares.sandbox.addons import AddonLayer


class CountingSource:
    """Writes one file, through worker threads as a real fill does, and counts its fills."""

    def __init__(self) -> None:
        self.fills = 0

    async def populate(self, dest: Path) -> None:
        self.fills += 1
        await asyncio.sleep(0.05)  # episodes pile up on the lock meanwhile
        await asyncio.to_thread((dest / "tool").write_text, "#!/bin/sh\n")


async def test_concurrent_asks_on_a_small_executor_fill_the_layer_once(tmp_path: Path) -> None:
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=2))
    source = CountingSource()
    layer = AddonLayer(key="tool-1.0", mount="/opt/tool", source=source)
    dirs = await asyncio.wait_for(asyncio.gather(*(ensure_addon(layer, tmp_path) for _ in range(8))), 30)
    assert len(set(dirs)) == 1 and source.fills == 1
    assert (content_dir(dirs[0], layer) / "tool").read_text() == "#!/bin/sh\n"
