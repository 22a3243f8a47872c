"""The local model's thread count: given, from ARES_LOCAL_THREADS, or the CPUs other processes leave idle."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from ares.errors import LLMError
from ares.llm.local.threads import THREADS_ENV, allowed_cpus, idle_cpus, pick_threads

HOG = "import os, sys; os.sched_setaffinity(0, {int(sys.argv[1])}); print(flush=True)\nwhile True: pass"


@pytest.fixture
def hogs() -> Iterator[None]:
    """One busy loop pinned to each CPU this process may use."""
    procs = [
        subprocess.Popen([sys.executable, "-c", HOG, str(cpu)], stdout=subprocess.PIPE)
        for cpu in sorted(allowed_cpus())
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline() == b"\n"  # pinned and spinning
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def test_a_given_count_wins_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(THREADS_ENV, "3")
    assert pick_threads(5) == 5
    assert pick_threads() == 3
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(THREADS_ENV, bad)
        with pytest.raises(LLMError, match=f"{THREADS_ENV} must be a whole number >= 1, got '{bad}'"):
            pick_threads()


def test_the_default_is_the_idle_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(THREADS_ENV, raising=False)
    assert 1 <= pick_threads() <= len(allowed_cpus())


@pytest.mark.usefixtures("hogs")
def test_every_cpu_busy_leaves_one_thread() -> None:
    assert idle_cpus() == 1
