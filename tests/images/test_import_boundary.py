"""``ares.images`` sits below the sandboxes: importing any of it loads no sandbox module."""

from __future__ import annotations

import subprocess
import sys

import ares.images


def test_importing_every_images_module_loads_no_sandbox_module() -> None:
    script = (
        "import importlib, pkgutil, sys\n"
        "import ares.images as pkg\n"
        "for info in pkgutil.walk_packages(pkg.__path__, 'ares.images.'):\n"
        "    importlib.import_module(info.name)\n"
        "print('\\n'.join(sorted(n for n in sys.modules if n.startswith('ares.sandbox'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"ares.images pulled in: {out.stdout.split()}"
    assert ares.images.__path__
