"""seccomp probes: kernel support, and libseccomp through ``pyseccomp`` building and enforcing a filter.

Local sandboxes install a syscall filter that libseccomp compiles; the library check compiles a
one-rule filter, exports its BPF and loads it in a child process, then checks the rule bites.
"""

from __future__ import annotations

import contextlib
import ctypes
from pathlib import Path

from ares.doctor.check import Check, run_python

PR_GET_SECCOMP = 21
#: Child code: a filter denying sched_yield (EPERM), exported, loaded, and tried.
FILTER_PROBE = """
import ctypes.util, errno, json, os, tempfile
try:
    import pyseccomp
except ImportError as exc:
    print(json.dumps({"ok": False, "missing": "pyseccomp", "detail": f"pyseccomp is not installed: {exc}"}))
    raise SystemExit
except (OSError, RuntimeError) as exc:
    print(json.dumps({"ok": False, "missing": "libseccomp", "detail": f"libseccomp cannot be loaded: {exc}"}))
    raise SystemExit
rule = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
rule.add_rule(pyseccomp.ERRNO(errno.EPERM), "sched_yield")
with tempfile.TemporaryFile() as f:
    rule.export_bpf(f)
    size = os.fstat(f.fileno()).st_size
rule.load()
try:
    os.sched_yield()
    ok, what = False, "loaded a filter, but the syscall it denies still ran"
except PermissionError:
    ok, what = True, "built, exported and enforced a filter in a child"
lib = ctypes.util.find_library("seccomp")
detail = f"pyseccomp {pyseccomp.__version__} with {lib}: {what} ({size} bytes of BPF)"
print(json.dumps({"ok": ok, "detail": detail}))
"""


def seccomp_kernel() -> Check:
    """The kernel's seccomp support: the ``Seccomp:`` status line, PR_GET_SECCOMP, filter actions."""
    status = ""
    with contextlib.suppress(OSError), open("/proc/self/status") as f:
        status = next((line.split(":", 1)[1].strip() for line in f if line.startswith("Seccomp:")), "")
    libc = ctypes.CDLL(None, use_errno=True)
    mode = libc.prctl(PR_GET_SECCOMP, 0, 0, 0, 0)
    actions = ""
    with contextlib.suppress(OSError):
        actions = Path("/proc/sys/kernel/seccomp/actions_avail").read_text().strip()
    if not status or mode < 0:
        return Check("seccomp-kernel", False, "this kernel has no seccomp (CONFIG_SECCOMP is off)")
    if not actions:
        return Check(
            "seccomp-kernel", False, "this kernel has seccomp but no filter mode (CONFIG_SECCOMP_FILTER)"
        )
    current = {0: "not filtered", 1: "in strict mode", 2: "already filtered (filters nest)"}.get(mode, "")
    return Check(
        "seccomp-kernel", True, f"filter mode available (actions: {actions}); this process is {current}"
    )


def seccomp_library() -> Check:
    result = run_python(["-c", FILTER_PROBE])
    fix = {"pyseccomp": "pip install pyseccomp", "libseccomp": "apt-get install -y libseccomp2"}.get(
        str(result.get("missing")), None if result["ok"] else "apt-get install -y libseccomp2"
    )
    return Check("seccomp-library", result["ok"], result["detail"], None if result["ok"] else fix)
