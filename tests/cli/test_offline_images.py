"""``ares run`` on the Harbor fixtures (``FROM python:3.11-slim``) with no registry in reach.

With ``ARES_IMAGE_FALLBACK=standin`` the registry is looked up once, every image is served by the
stand-in and reported as a substitution, never as a failure; with the fallback off the run's summary
shows the whole remedy. The registry is made unreachable for real: HTTPS goes to a proxy that is not
there, except to PyPI (a fixture's build step installs pytest).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from ares.errors import FIX, clip_error
from ares.images.build.standins import host_python_version

ROOT = Path(__file__).resolve().parents[2]
HARBOR = ROOT / "tests" / "fixtures" / "harbor"
PYPI = "pypi.org,files.pythonhosted.org"


def dead_proxy() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def run_offline(tmp_path: Path, fallback: str) -> subprocess.CompletedProcess[str]:
    proxy = dead_proxy()
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("no_proxy", "all_proxy")}
    env |= {"HTTPS_PROXY": proxy, "https_proxy": proxy, "NO_PROXY": PYPI, "no_proxy": PYPI}
    env |= {"ARES_IMAGE_FALLBACK": fallback}
    env |= {"ARES_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "400"}
    command = [sys.executable, "-m", "ares.cli.main", "run", "harbor", "--path", str(HARBOR)]
    command += ["--policy", "oracle", "--out", str(tmp_path / "out")]
    return subprocess.run(
        command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600, check=False
    )


def test_standin_learns_the_registry_once_and_reports_substitutions(tmp_path: Path) -> None:
    done = run_offline(tmp_path, "standin")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FAILED" not in done.stdout
    notes = [line for line in done.stdout.splitlines() if "no registry in reach" in line]
    served = f"served by stand-in ares/host-python (the host's Python {host_python_version()})"
    assert notes and all(line.startswith("image python:3.11-slim: ") and served in line for line in notes)
    looked_up = [line for line in notes if "cannot reach docker.io" in line]
    assert len(looked_up) == 1  # the one lookup; the others knew already
    assert len(notes) - 1 == sum("docker.io out of reach, found earlier in this run" in n for n in notes)


def test_without_the_fallback_the_summary_shows_the_whole_remedy(tmp_path: Path) -> None:
    done = run_offline(tmp_path, "off")
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [
        line for line in done.stdout.splitlines() if "x BaseUnavailableError: FROM python:3.11-slim" in line
    ]
    assert len(errors) == 1, done.stdout  # one distinct error for every task of that base
    remedy = (
        f"{FIX}set ARES_IMAGE_FALLBACK=standin (or `ares images build --fallback standin`) to build offline"
        f" on the stand-in ares/host-python (the host's Python {host_python_version()})"
    )
    assert remedy in errors[0]


def test_clipping_an_error_keeps_its_remedy_whole() -> None:
    remedy = f"{FIX}set X=1 to make it work"
    text = "FROM a: " + "detail " * 100 + "end of the problem" + remedy
    clipped = clip_error(text, 120)
    assert clipped.startswith("FROM a: detail") and clipped.endswith("end of the problem" + remedy)
    assert " … " in clipped and len(clipped) <= 120 + len(remedy)
    assert clip_error("short" + remedy, 120) == "short" + remedy
    plain = clip_error("x" * 500, 100)
    assert len(plain) == 100 and plain.startswith("x") and plain.endswith("x")
