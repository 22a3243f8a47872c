"""Start child processes that a test can stop with SIGINT, whatever the test runner inherited.

A shell that starts a command in the background without job control (``pytest &``, ``nohup``, many
CI wrappers) starts it with SIGINT and SIGQUIT ignored, and an ignored signal stays ignored across
fork and exec: a child Python would then never raise KeyboardInterrupt, and a Ctrl-C test would
see nothing happen. Tests that send SIGINT start their children through :func:`popen_interruptible`.
"""

from __future__ import annotations

import signal
import subprocess
from typing import Any


def restore_sigint() -> None:
    """In the forked child, before exec: SIGINT back to its default so Python installs its handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def popen_interruptible(args: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen`` whose child gets the default SIGINT disposition."""
    return subprocess.Popen(args, preexec_fn=restore_sigint, **kwargs)
