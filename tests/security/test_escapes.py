"""Escapes: leaving the sandbox's namespaces or root, reaching ARES's own processes, or making the host
act on the sandbox's behalf (setuid files on the host, symlinks and crafted archives on download)."""

from __future__ import annotations

import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Scenario = Callable[..., dict[str, Any]]
TOKEN = secrets.token_hex(4)

# Each must fail (exit code != 0).
ESCAPE_COMMANDS = {
    "mount_tmpfs": "mount -t tmpfs none /mnt",
    "mount_bind_root": "mount --bind / /mnt",
    "mount_proc_again": "mkdir -p /tmp/p && mount -t proc proc /tmp/p",
    "mount_sysfs": "mount -t sysfs sysfs /mnt",
    "mount_cgroup2": "mount -t cgroup2 none /mnt",
    "unshare_user": "unshare -U true",
    "unshare_user_map_root": "unshare -Ur true",
    "unshare_mount": "unshare -m true",
    "unshare_net": "unshare -n true",
    "unshare_pid": "unshare -pf true",
    "unshare_cgroup": "unshare -C true",
    "unshare_time": "unshare -T true",
    "nsenter_pid1_mount": "nsenter -t 1 -m true",
    "nsenter_pid1_all": "nsenter -t 1 -a true",
    "pivot_root": "mkdir -p /tmp/newroot/old && cd /tmp/newroot && pivot_root . old",
}
# Run last: each must fail, and none may unmount anything (a success would strip the sandbox's masks).
UMOUNT_COMMANDS = {
    "umount_masks": "for m in $(awk '$5 ~ \"^/(proc|dev|sys)/\" {print $5}' /proc/self/mountinfo | sort -r); "
    'do umount "$m" 2>/dev/null && echo "UNMOUNTED $m"; umount -l "$m" 2>/dev/null && echo "UNMOUNTED $m"; '
    "done; true",
    "umount_proc": "umount /proc",
    "umount_proc_lazy": "umount -l /proc",
}

# First command in the sandbox: every process it sees but did not start is an ARES helper.
HELPERS_PROBE = r"""
import ctypes, errno, json, os, sys
marker = json.loads(sys.argv[1])["marker"]
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.syscall.restype = ctypes.c_long

def err(e):
    return "error:" + errno.errorcode.get(e.errno, str(e.errno))

def attempt(fn):
    try:
        return fn()
    except OSError as e:
        return err(e)

def read(path, n=4096):
    with open(path, "rb") as f:
        return f.read(n).decode(errors="replace")

me, my_sid = os.getpid(), os.getsid(0)
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
helpers = [p for p in pids if p != me and (p == 1 or attempt(lambda: os.getsid(p)) != my_sid)]
out = {"helpers": {}, "pids": pids}
for pid in helpers:
    info = {}
    ctypes.set_errno(0)
    ret = libc.ptrace(ctypes.c_long(0x4206), ctypes.c_long(pid), None, None)  # PTRACE_SEIZE
    info["ptrace_seize"] = "attached" if ret == 0 else errno.errorcode.get(ctypes.get_errno(), "?")
    if ret == 0:
        libc.ptrace(ctypes.c_long(17), ctypes.c_long(pid), None, None)
    info["mem"] = attempt(lambda: (os.close(os.open(f"/proc/{pid}/mem", os.O_RDONLY)), "opened")[1])
    info["environ"] = attempt(lambda: "read:" + read(f"/proc/{pid}/environ")[:200])
    info["exe_link"] = attempt(lambda: "link:" + os.readlink(f"/proc/{pid}/exe"))
    info["exe_open"] = attempt(lambda: (os.close(os.open(f"/proc/{pid}/exe", os.O_RDONLY)), "opened")[1])
    info["fd_list"] = attempt(lambda: "listed:" + ",".join(os.listdir(f"/proc/{pid}/fd")))
    stolen = []
    try:
        pidfd = os.pidfd_open(pid)
    except OSError as e:
        info["pidfd_getfd"] = "pidfd_open " + err(e)
    else:
        for fd in range(64):
            got = libc.syscall(ctypes.c_long(438), ctypes.c_long(pidfd), ctypes.c_long(fd), ctypes.c_long(0))
            if got >= 0:
                stolen.append(fd)
                os.close(got)
        os.close(pidfd)
        info["pidfd_getfd"] = "stole:" + ",".join(map(str, stolen)) if stolen else "refused"
    def write_same():
        value = read(f"/proc/{pid}/oom_score_adj").strip()
        fd = os.open(f"/proc/{pid}/oom_score_adj", os.O_WRONLY)
        try:
            os.write(fd, value.encode())  # the same value: proves writability, changes nothing
        finally:
            os.close(fd)
        return "written"
    info["oom_score_adj"] = attempt(write_same)
    out["helpers"][str(pid)] = info

via_proc = {}
for pid in pids + [me]:
    for path in (f"/proc/{pid}/root{marker}", f"/proc/{pid}/cwd/{marker.lstrip('/')}",
                 f"/proc/{pid}/cwd/../../../../../../../..{marker}"):
        via_proc[path] = attempt(lambda: "read:" + read(path, 200))
out["via_proc"] = via_proc
fds = os.listdir("/proc/self/fd")
out["own_fds"] = {fd: attempt(lambda: os.readlink(f"/proc/self/fd/{fd}")) for fd in fds}
out["direct"] = attempt(lambda: "read:" + read(marker, 200))
print(json.dumps(out))
"""

CHROOT_PROBE = r"""
import errno, json, os, sys
marker = json.loads(sys.argv[1])["marker"]
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    res = {"root_before": sorted(os.listdir("/"))}
    try:
        os.makedirs("/tmp/jail/inner", exist_ok=True)
        fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
        os.chroot("/tmp/jail")
        os.fchdir(fd)
        for _ in range(256):
            os.chdir("..")
        os.chroot(".")
        res["chroot"] = "done"
        res["root_after"] = sorted(os.listdir("/"))
    except OSError as e:
        res["chroot"] = "error:" + errno.errorcode.get(e.errno, str(e.errno))
    try:
        with open(marker) as f:
            res["marker"] = "read:" + f.read(200)
    except OSError as e:
        res["marker"] = "error:" + errno.errorcode.get(e.errno, str(e.errno))
    os.write(w, json.dumps(res).encode())
    os._exit(0)
os.close(w)
data = b""
while chunk := os.read(r, 65536):
    data += chunk
os.waitpid(pid, 0)
print(data.decode())
"""

# Builds one crafted archive per attack in the sandbox and replaces `tar` so that a download returns it.
EVIL_TAR_PROBE = r"""
import io, json, os, sys, tarfile
a = json.loads(sys.argv[1])
tok, base, marker = a["token"], a["base"], a["marker"]

def reg(tf, name, data=b"pwned", mode=0o644):
    ti = tarfile.TarInfo(name)
    ti.size, ti.mode, ti.uid, ti.gid = len(data), mode, 0, 0
    tf.addfile(ti, io.BytesIO(data))

def link(tf, name, target, kind):
    ti = tarfile.TarInfo(name)
    ti.type, ti.linkname = kind, target
    tf.addfile(ti)

def dev(tf, name):
    ti = tarfile.TarInfo(name)
    ti.type, ti.devmajor, ti.devminor, ti.mode = tarfile.CHRTYPE, 1, 1, 0o666
    tf.addfile(ti)

KINDS = {
    "dotdot": lambda tf: [reg(tf, "dotdot/" + "../" * n + f"pwned-dotdot{n}-{tok}") for n in (1, 2, 3, 4)],
    "absolute": lambda tf: reg(tf, f"{base}/pwned-absolute-{tok}"),
    "abslink": lambda tf: [link(tf, "abslink/esc", base, tarfile.SYMTYPE),
                           reg(tf, f"abslink/esc/pwned-abslink-{tok}")],
    "rellink": lambda tf: [link(tf, "rellink/up", "../../../..", tarfile.SYMTYPE),
                           reg(tf, f"rellink/up/pwned-rellink-{tok}")],
    "hardlink": lambda tf: [link(tf, "hardlink/hl", marker, tarfile.LNKTYPE),
                            reg(tf, "hardlink/hl", b"pwned-through-hardlink")],
    "device": lambda tf: dev(tf, "device/mem"),
    "setuid": lambda tf: reg(tf, "setuid/sh", b"#!/bin/sh\nid\n", 0o6755),
}
for kind, build in KINDS.items():
    with tarfile.open(f"/tmp/evil-{kind}.tar", "w", format=tarfile.GNU_FORMAT) as tf:
        top = tarfile.TarInfo(kind)
        top.type, top.mode = tarfile.DIRTYPE, 0o755
        tf.addfile(top)
        build(tf)
script = '#!/bin/sh\nfor a in "$@"; do last=$a; done\nexec cat "/tmp/evil-${last##*/}.tar"\n'
for path in ("/usr/local/sbin/tar", "/usr/local/bin/tar", "/usr/bin/tar", "/bin/tar"):
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.lexists(path):
            os.unlink(path)
        with open(path, "w") as f:
            f.write(script)
        os.chmod(path, 0o755)
    except OSError:
        pass
print(json.dumps({"kinds": list(KINDS)}))
"""

SCENARIO = """
import stat as _stat


def suid_files(root):
    found = []
    for dirpath, dirnames, filenames in os.walk(root, onerror=lambda e: None):
        for name in filenames:
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if _stat.S_ISREG(st.st_mode) and st.st_mode & (_stat.S_ISUID | _stat.S_ISGID):
                try:
                    dirs_open = all(os.stat(p).st_mode & 0o001 for p in Path(path).parents)
                except OSError:
                    dirs_open = False
                open_to_others = dirs_open and st.st_mode & 0o001
                found.append({"path": path, "uid": st.st_uid, "gid": st.st_gid, "mode": st.st_mode,
                              "reachable": bool(open_to_others)})
    return found


def tree(root, skip):
    entries = []
    for dirpath, dirnames, filenames in os.walk(root, onerror=lambda e: None):
        dirnames[:] = [d for d in dirnames if os.path.join(dirpath, d) not in skip]
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            entry = {"path": path, "mode": st.st_mode}
            if _stat.S_ISREG(st.st_mode):
                try:
                    entry["head"] = Path(path).read_bytes()[:200].decode(errors="replace")
                except OSError:
                    pass
            elif _stat.S_ISLNK(st.st_mode):
                entry["link"] = os.readlink(path)
            entries.append(entry)
    return entries


async def attempt(coro):
    try:
        await asyncio.wait_for(coro, 60)
        return {"ok": True}
    except Exception as exc:
        return {"raised": f"{type(exc).__name__}: {exc}"[:500]}


async def scenario(args):
    out = {}
    dl = Path(args["dl"])
    marker, base = args["marker"], args["base"]
    async with LocalSandbox(SandboxSpec()) as sb:
        out["helpers"] = await probe(sb, args["helpers_probe"], argv={"marker": marker})
        out["chroot"] = await probe(sb, args["chroot_probe"], argv={"marker": marker})
        out["commands"] = {name: await run(sb, cmd) for name, cmd in args["commands"].items()}
        out["suid_cmd"] = await run(
            sb, "cp /bin/sh /tmp/ares-suid && chmod 6755 /tmp/ares-suid && cp /bin/sh /workspace/ares-suid "
            "&& chmod 4755 /workspace/ares-suid && cp /bin/sh /root/ares-suid && chmod 4755 /root/ares-suid"
        )
        out["suid_host"] = suid_files(args["state"])
        plant = (f"ln -s {marker} /workspace/link-file && ln -s {base} /workspace/link-dir && "
                 f"mkdir /workspace/tree && ln -s {marker} /workspace/tree/inner && "
                 f"ln -s {base} /workspace/tree/dir && echo sandbox-data > /workspace/tree/plain && "
                 f"ln -s {base} /workspace/up")
        out["plant"] = await run(sb, plant)
        downloads = {}
        for name in ("link-file", "link-dir", "tree"):
            (dl / name).mkdir()
            downloads[name] = await attempt(sb.download(f"/workspace/{name}", dl / name / "out"))
        try:
            data = await asyncio.wait_for(sb.read_file("/workspace/link-file"), 30)
            out["read_file"] = {"data": data[:200].decode(errors="replace")}
        except Exception as exc:
            out["read_file"] = {"raised": f"{type(exc).__name__}: {exc}"[:500]}
        token = args["token"]
        out["upload"] = await attempt(sb.upload({f"pwned-upload-{token}": "pwned"}, "/workspace/up"))
        out["evil_setup"] = await probe(sb, args["evil_probe"], argv={"token": token, "base": base,
                                                                       "marker": marker})
        for kind in (out["evil_setup"]["data"] or {}).get("kinds", []):
            (dl / kind).mkdir()
            downloads[kind] = await attempt(sb.download(f"/workspace/{kind}", dl / kind / "out"))
        out["downloads"] = downloads
        out["umount"] = {name: await run(sb, cmd) for name, cmd in args["umount"].items()}
    out["marker_after"] = Path(marker).read_text()
    out["tree"] = tree(base, {args["state"], str(Path(base) / "home")})
    return out
"""


@pytest.fixture(scope="module")
def result(scenario: Scenario, host: Any) -> dict[str, Any]:
    dl = host.scratch("dl")
    args = {
        "helpers_probe": HELPERS_PROBE,
        "chroot_probe": CHROOT_PROBE,
        "evil_probe": EVIL_TAR_PROBE,
        "commands": ESCAPE_COMMANDS,
        "umount": UMOUNT_COMMANDS,
        "dl": str(dl),
        "token": TOKEN,
    }
    res = scenario(SCENARIO, args)
    res["dl"] = str(dl)
    return res


def _data(result: dict[str, Any], key: str) -> dict[str, Any]:
    data = result[key]["data"]
    assert data is not None, result[key]["exec"]
    return data


@pytest.mark.parametrize("name", list(ESCAPE_COMMANDS))
def test_namespace_and_mount_escape_command_fails(result: dict[str, Any], name: str) -> None:
    """Attack: regain privileges or leave the sandbox's namespaces with ordinary tools: mount a tmpfs,
    bind-mount /, mount a fresh proc (unmasked), sysfs or cgroup2 (host knobs), unshare new
    user/mount/net/pid/cgroup/time namespaces, nsenter pid 1's namespaces, pivot_root. Expected: each
    command exits non-zero."""
    res = result["commands"][name]
    assert "raised" not in res, res
    assert res["exit_code"] != 0, f"{ESCAPE_COMMANDS[name]!r} succeeded: {res}"


@pytest.mark.parametrize("name", list(UMOUNT_COMMANDS))
def test_masks_and_proc_cannot_be_unmounted(result: dict[str, Any], name: str) -> None:
    """Attack: unmount /proc or any mount masking /proc, /dev or /sys (e.g. the /dev/null over
    /proc/kcore, the read-only /proc/sys) to uncover what it hides. Expected: every umount fails
    and nothing is unmounted."""
    res = result["umount"][name]
    assert "raised" not in res, res
    assert "UNMOUNTED" not in res["stdout"], res["stdout"]
    if name != "umount_masks":
        assert res["exit_code"] != 0, res


def test_chroot_fd_escape_stays_in_the_sandbox(result: dict[str, Any], host: Any) -> None:
    """Attack: the classic chroot breakout (hold a dir fd, chroot into a subdir, fchdir back, chdir ..
    repeatedly, chroot(".")). Expected: either chroot is refused, or the root reached is the
    sandbox's own root (same listing as before) and the host-only marker file stays unreadable."""
    data = _data(result, "chroot")
    assert host.marker_text not in data.get("marker", ""), "the chroot escape read a host-only file"
    if data.get("chroot") == "done":
        assert data["root_after"] == data["root_before"], data


def test_host_files_unreachable_through_proc_links(result: dict[str, Any], host: Any) -> None:
    """Attack: read a host-only file through /proc/<pid>/root or /proc/<pid>/cwd of every visible
    process (pid 1 and ARES's helpers included), or by its host path. Expected: never readable."""
    data = _data(result, "helpers")
    assert host.marker_text not in data["direct"]
    leaks = [path for path, outcome in data["via_proc"].items() if host.marker_text in outcome]
    assert not leaks, leaks


def _helpers(result: dict[str, Any]) -> dict[str, dict[str, str]]:
    helpers: dict[str, dict[str, str]] = _data(result, "helpers")["helpers"]
    assert "1" in helpers, "pid 1 is not visible to the probe"
    return helpers


def test_ptrace_of_pid1_and_ares_helpers_fails(result: dict[str, Any]) -> None:
    """Attack: ptrace pid 1 or another ARES helper (a shepherd) to run code in the process that holds
    the control socket to the host. Expected: PTRACE_SEIZE (the same permission check as
    PTRACE_ATTACH, without stopping the target) fails for every process the command did not start."""
    for pid, info in _helpers(result).items():
        assert info["ptrace_seize"] != "attached", f"ptrace attached to ARES helper pid {pid}"


@pytest.mark.parametrize("what", ["mem", "environ", "exe_link", "exe_open", "fd_list"])
def test_ares_helper_internals_are_unreadable(result: dict[str, Any], what: str) -> None:
    """Attack: read pid 1's (and every helper's) memory, environment, executable (a host path and a
    host file) or fd table. Expected: /proc/<pid>/mem, environ and exe cannot be opened or read, the
    exe link cannot be resolved, and the fd table cannot be listed."""
    for pid, info in _helpers(result).items():
        outcome = info[what]
        assert outcome.startswith("error:"), f"/proc/{pid} {what}: {outcome[:200]}"


def test_fds_of_ares_helpers_cannot_be_stolen(result: dict[str, Any]) -> None:
    """Attack: pidfd_getfd(2) the control socket (or any fd) out of pid 1 or a shepherd, to talk to the
    host's ARES directly. Expected: refused for every fd of every helper."""
    for pid, info in _helpers(result).items():
        assert not info["pidfd_getfd"].startswith("stole"), f"pid {pid}: {info['pidfd_getfd']}"


def test_pid1_oom_score_adj_cannot_be_written(result: dict[str, Any]) -> None:
    """Attack: make pid 1 the OOM killer's first victim (write /proc/1/oom_score_adj) so that the
    agent's next allocation kills the sandbox's init. Expected: opening it for writing (or writing its
    own current value back) fails."""
    assert _helpers(result)["1"]["oom_score_adj"] != "written"


def test_command_inherits_only_stdio(result: dict[str, Any]) -> None:
    """Attack: use an fd leaked into the command (the control or reply socket, a host dir, the init's
    log) to forge requests or reach host files. Expected: a command's open fds are 0, 1, 2 and the
    probe's own listing fd only."""
    fds = _data(result, "helpers")["own_fds"]
    extra = {fd: target for fd, target in fds.items() if int(fd) > 3}
    assert not extra, extra


def test_setuid_file_made_inside_gives_host_users_nothing(result: dict[str, Any]) -> None:
    """Attack: sandbox root creates setuid/setgid copies of /bin/sh (/tmp, /workspace, /root); on the
    host they sit in the sandbox's upper dir, where another host user could run them. Expected: the
    files exist on the host (the attack ran) but none is both owned by host root (setuid: uid 0,
    setgid: gid 0) and reachable by other host users (every dir from / down searchable by others,
    the file executable by others). The upper dir's path is no secret: other users read it from the
    sandbox init's /proc/<pid>/mountinfo."""
    assert result["suid_cmd"].get("exit_code") == 0, result["suid_cmd"]
    found = result["suid_host"]
    assert found, "no setuid file from the sandbox found under the state dir"
    for entry in found:
        root_owned = (entry["mode"] & stat.S_ISUID and entry["uid"] == 0) or (
            entry["mode"] & stat.S_ISGID and entry["gid"] == 0
        )
        assert not (root_owned and entry["reachable"]), f"setuid-root file open to host users: {entry}"


def _escaped(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Entries named pwned-* outside the download destinations (``dl/<kind>/out`` and its staging)."""
    out = []
    for entry in result["tree"]:
        path = Path(entry["path"])
        if not path.name.startswith("pwned-"):
            continue
        rel = path.relative_to(result["dl"]).parts if path.is_relative_to(result["dl"]) else ()
        if len(rel) >= 3 and (rel[1] == "out" or rel[1].startswith(".out")):
            continue
        out.append(entry)
    return out


def test_planted_symlinks_are_not_followed_on_the_host(result: dict[str, Any], host: Any) -> None:
    """Attack: plant symlinks to host paths (a host-only file, a host dir) in the sandbox and wait for
    the host to download them, or to read_file one. Expected: each download either fails or yields
    links / the sandbox's own data: no regular file the host writes contains the host-only file's
    text; read_file returns no host data."""
    assert result["plant"].get("exit_code") == 0, result["plant"]
    for entry in result["tree"]:
        if stat.S_ISREG(entry["mode"]) and entry["path"] != str(host.marker):
            assert host.marker_text not in entry.get("head", ""), f"host file copied to {entry['path']}"
    assert host.marker_text not in result["read_file"].get("data", "")


def test_upload_through_a_planted_symlink_stays_inside(result: dict[str, Any]) -> None:
    """Attack: point /workspace/up at a host dir and wait for the host to upload there. Expected: the
    uploaded file never appears on the host."""
    leaked = [e for e in result["tree"] if Path(e["path"]).name.startswith("pwned-upload-")]
    assert not leaked, leaked


@pytest.mark.parametrize("kind", ["dotdot", "absolute", "abslink", "rellink"])
def test_crafted_download_archive_cannot_write_outside(result: dict[str, Any], kind: str) -> None:
    """Attack: sandbox root replaces `tar` so that a download returns a crafted archive: ../ names,
    an absolute name, a symlink to a host dir (absolute or ../) followed by a file through it.
    Expected: the download may fail, but no file lands outside the destination."""
    assert kind in result["downloads"], result["evil_setup"]
    leaked = [e["path"] for e in _escaped(result) if f"pwned-{kind}" in e["path"]]
    assert not leaked, leaked


def test_crafted_hardlink_cannot_touch_host_files(result: dict[str, Any], host: Any) -> None:
    """Attack: a downloaded archive hard-links a member to a host-only file, then writes a member of the
    same name (through the link). Expected: the host file keeps its content and no file in the
    download holds it."""
    assert "hardlink" in result["downloads"], result["evil_setup"]
    assert result["marker_after"] == host.marker_text, "a download rewrote a host file"
    for entry in result["tree"]:
        if stat.S_ISREG(entry["mode"]) and "/hardlink/" in entry["path"]:
            assert host.marker_text not in entry.get("head", ""), entry


def test_crafted_download_makes_no_device_or_setuid_file(result: dict[str, Any]) -> None:
    """Attack: a downloaded archive holds a char device (/dev/mem, 1:1) and a setuid-root script.
    Expected: the host creates neither a device node nor a setuid/setgid file."""
    assert {"device", "setuid"} <= set(result["downloads"]), result["evil_setup"]
    for entry in result["tree"]:
        mode = entry["mode"]
        assert not (stat.S_ISCHR(mode) or stat.S_ISBLK(mode)), f"device node on the host: {entry}"
        assert not (stat.S_ISREG(mode) and mode & (stat.S_ISUID | stat.S_ISGID)), f"setuid file: {entry}"
