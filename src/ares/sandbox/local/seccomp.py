"""The syscall filter of local sandboxes, compiled by libseccomp on the host and installed by the init.

The default profile has the semantics of Docker's default: every syscall libseccomp knows is allowed
except those that reach the kernel's global state or other namespaces (module loading, kexec, keyrings,
bpf, perf, userfaultfd, mount and the new mount API, namespace creation and entry, clock and swap
control, io_uring, raw I/O ports...) and those Docker grants only with CAP_SYS_PTRACE (kcmp,
pidfd_getfd, process_madvise), which fail with EPERM. ``prlimit64`` may read any process's limits
but set only the caller's own (pid 0): root in the sandbox's user namespace could otherwise lower
its init's limits (CPU time 0: the kernel kills the init) and so kill its own sandbox from inside,
leaving no trace that tells it from a kill by the host. Syscalls libseccomp does not know (newer
than its table) fail with ENOSYS so that libc falls back to an older one, as it does on older kernels;
``clone3`` fails with ENOSYS for the same reason, so namespace flags always go through ``clone``, whose
flags a filter can read. Syscalls of another ABI (32-bit ``int 0x80`` on x86_64) fail with ENOSYS.

A task relaxes the filter with ``SeccompPolicy(profile="unconfined")`` or by allowing named syscalls
(``allow=("perf_event_open",)``); an allowed syscall is allowed with any arguments.
"""

from __future__ import annotations

import errno
import functools
import json
import os
from types import EllipsisType

from ares.errors import SandboxUnavailableError
from ares.sandbox.base import SeccompPolicy

#: Denied outright (EPERM), by name; names this libseccomp does not know are skipped.
_DENIED_NAMES = """
    acct add_key bpf clock_adjtime clock_settime create_module delete_module fanotify_init finit_module
    fsconfig fsmount fsopen fspick get_kernel_syms init_module io_uring_enter io_uring_register
    io_uring_setup ioperm iopl kcmp kexec_file_load kexec_load keyctl lookup_dcookie mbind migrate_pages
    mount mount_setattr move_mount move_pages name_to_handle_at nfsservctl open_by_handle_at open_tree
    perf_event_open pidfd_getfd pivot_root process_madvise quotactl quotactl_fd reboot request_key
    set_mempolicy set_mempolicy_home_node setdomainname sethostname setns settimeofday stime
    swapoff swapon syslog sysfs _sysctl umount umount2 uselib userfaultfd ustat vhangup vm86 vm86old
"""
DENIED = frozenset(_DENIED_NAMES.split())
#: Allowed only when no namespace flag is set (EPERM otherwise).
NAMESPACE_FLAGGED = ("clone", "unshare")
#: CLONE_NEWTIME, NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET.
NAMESPACE_FLAGS = (0x80, 0x20000, 0x2000000, 0x4000000, 0x8000000, 0x10000000, 0x20000000, 0x40000000)
#: Allowed for the caller itself (pid 0) or to read (no new limit); EPERM for setting another's.
SELF_ONLY = ("prlimit64",)
#: personality(2) values allowed: Linux, UNAME26 variants, and the query 0xffffffff.
PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)
#: Left to the default action (ENOSYS) so that libc falls back to the syscall a filter can inspect.
FALLBACK_TO_OLDER = frozenset({"clone3"})
#: The highest syscall number tried when listing the native table.
MAX_SYSCALL = 1024


@functools.cache
def known_syscalls() -> dict[str, int]:
    """Name -> number of every syscall this libseccomp knows for the native architecture (read once:
    listing the table takes ~1,000 calls into libseccomp)."""
    seccomp = _library()
    arch = seccomp.system_arch()
    table: dict[str, int] = {}
    for number in range(MAX_SYSCALL):
        try:
            name = seccomp.resolve_syscall(arch, number)
        except (OSError, ValueError):
            continue
        if name:
            table[name.decode()] = number
    return table


def validate(policy: SeccompPolicy) -> None:
    """Reject names a policy allows that no architecture table here knows (a typo must not pass)."""
    if policy.profile not in ("default", "unconfined"):
        raise SandboxUnavailableError(
            f"unknown seccomp profile {policy.profile!r}; use 'default' or 'unconfined'"
        )
    if policy.profile == "default" and policy.allow:
        unknown = sorted(set(policy.allow) - known_syscalls().keys())
        if unknown:
            raise SandboxUnavailableError(f"seccomp allow list names unknown syscalls: {', '.join(unknown)}")


_compiled: dict[SeccompPolicy, bytes | None] = {}


def cached(policy: SeccompPolicy) -> bytes | EllipsisType | None:
    """The program already compiled for ``policy`` in this process, else ``...``."""
    return _compiled.get(policy, ...)


def compile_filter(policy: SeccompPolicy) -> bytes | None:
    """The BPF program for ``policy`` (None when unconfined), compiled once per process."""
    if policy in _compiled:
        return _compiled[policy]
    program = _compile(policy)
    _compiled[policy] = program
    return program


def _compile(policy: SeccompPolicy) -> bytes | None:
    if policy.profile == "unconfined":
        return None
    validate(policy)
    seccomp = _library()
    table = known_syscalls()
    allowed = set(policy.allow)
    flt = seccomp.SyscallFilter(defaction=seccomp.ERRNO(errno.ENOSYS))
    flt.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.ERRNO(errno.ENOSYS))
    deny = seccomp.ERRNO(errno.EPERM)
    for name in table:
        if name in allowed:
            flt.add_rule(seccomp.ALLOW, name)
        elif name in DENIED:
            flt.add_rule(deny, name)
        elif name in NAMESPACE_FLAGGED:
            mask = sum(NAMESPACE_FLAGS)
            flt.add_rule(seccomp.ALLOW, name, seccomp.Arg(0, seccomp.MASKED_EQ, mask, 0))
            for flag in NAMESPACE_FLAGS:
                flt.add_rule(deny, name, seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
        elif name in SELF_ONLY:  # (the filter's default is ENOSYS: say EPERM, as the kernel would)
            flt.add_rule(seccomp.ALLOW, name, seccomp.Arg(0, seccomp.EQ, 0))
            flt.add_rule(seccomp.ALLOW, name, seccomp.Arg(2, seccomp.EQ, 0))
            flt.add_rule(deny, name, seccomp.Arg(0, seccomp.NE, 0), seccomp.Arg(2, seccomp.NE, 0))
        elif name == "personality":
            for value in PERSONALITIES:
                flt.add_rule(seccomp.ALLOW, name, seccomp.Arg(0, seccomp.EQ, value))
        elif name not in FALLBACK_TO_OLDER:
            flt.add_rule(seccomp.ALLOW, name)
    fd = os.memfd_create("ares-seccomp")
    with open(fd, "w+b") as out:
        flt.export_bpf(out)
        out.flush()
        out.seek(0)
        return out.read()


def docker_security_opt(policy: SeccompPolicy) -> list[str]:
    """The Docker ``security_opt`` for ``policy``: the engine's own default profile when the task
    relaxes nothing, else a profile generated from this module's rules (as JSON, which the API takes)."""
    if policy.profile == "unconfined":
        return ["no-new-privileges", "seccomp=unconfined"]
    if not policy.allow:
        return ["no-new-privileges"]
    validate(policy)
    allowed = set(policy.allow)
    rules: list[dict[str, object]] = []
    plain = sorted(
        name for name in known_syscalls()
        if name in allowed or (name not in DENIED and name not in NAMESPACE_FLAGGED and name != "personality"
                               and name not in FALLBACK_TO_OLDER and name not in SELF_ONLY)
    )  # fmt: skip
    rules.append({"names": plain, "action": "SCMP_ACT_ALLOW"})
    for name in SELF_ONLY:
        if name not in allowed:  # its own limits (pid 0), or a read (no new limit)
            for index in (0, 2):
                arg = {"index": index, "value": 0, "op": "SCMP_CMP_EQ"}
                rules.append({"names": [name], "action": "SCMP_ACT_ALLOW", "args": [arg]})
    mask = sum(NAMESPACE_FLAGS)
    for name in NAMESPACE_FLAGGED:
        if name not in allowed:
            arg = {"index": 0, "value": mask, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}
            rules.append({"names": [name], "action": "SCMP_ACT_ALLOW", "args": [arg]})
    if "personality" not in allowed:
        for value in PERSONALITIES:
            arg = {"index": 0, "value": value, "op": "SCMP_CMP_EQ"}
            rules.append({"names": ["personality"], "action": "SCMP_ACT_ALLOW", "args": [arg]})
    profile = {"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": errno.EPERM, "syscalls": rules}
    return ["no-new-privileges", "seccomp=" + json.dumps(profile)]


def _library():  # type: ignore[no-untyped-def]
    """pyseccomp (a ctypes binding to libseccomp.so.2), with an actionable error when missing."""
    try:
        import pyseccomp
    except (ImportError, OSError) as exc:
        raise SandboxUnavailableError(
            f"the local sandbox's seccomp filter needs libseccomp ({exc}); install it with "
            "`apt-get install -y libseccomp2` (and `pip install pyseccomp`), or set the task's "
            "seccomp profile to 'unconfined'"
        ) from exc
    return pyseccomp
