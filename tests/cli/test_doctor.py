"""`ares doctor` on this machine, as root and as nobody: real probes, real facts, nothing left behind."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ares.cli.main import app
from ares.doctor import cgroups, kernel, network, report
from ares.doctor.check import Check, run_python
from nobody_python import SKIP_REASON, can_drop, nobody_python

SRC = Path(__file__).resolve().parents[2] / "src"
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
#: The doctor runs all probes side by side: about 0.3 s here (0.8 s with interpreter start-up) on an
#: idle machine; the budgets leave room for a machine busy with other test suites.
BUDGET_S = 5.0
WALL_BUDGET_S = 10.0


def v1_memory_mounted() -> bool:
    with open("/proc/self/mountinfo") as f:
        return any(" - cgroup " in line and "memory" in line.rsplit(" ", 1)[-1] for line in f)


def leftovers() -> list[str]:
    """Probe dirs, mounts and cgroups the doctor might have left behind."""
    found = [str(p) for p in Path(tempfile.gettempdir()).glob("ares-doctor-*")]
    cache = os.environ.get("ARES_CACHE_DIR")
    if cache and Path(cache).is_dir():
        found += [str(p) for p in Path(cache).glob("ares-doctor-*")]
    with open("/proc/self/mountinfo") as f:
        found += [line for line in f if "ares-doctor-" in line]
    found += [str(p) for p in Path("/sys/fs/cgroup").glob("**/ares-doctor-*") if p.is_dir()]
    return found


def doctor_json(**env: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(app, ["doctor", "--json"], env=env or None)
    return result.exit_code, json.loads(result.stdout)


@ROOT_ONLY
def test_root_json_reports_this_machine() -> None:
    code, data = doctor_json()
    checks = data["checks"]
    assert code == 0 and data["root"] is True and data["local_ready"] is True
    for name in ("kernel", "user-namespaces", "overlayfs", "idmapped-mounts", "idmapped-tmpfs"):
        assert checks[name]["ok"], checks[name]
    assert "1879048192" in checks["idmapped-mounts"]["detail"]
    assert checks["seccomp-kernel"]["ok"] and checks["seccomp-library"]["ok"]
    assert data["backends"]["local"] == {"ready": True, "detail": "ready (root mode)"}
    assert data["limits"]["disk"]["mechanism"] == "tmpfs"
    if v1_memory_mounted():
        assert checks["cgroup-memory"]["ok"], checks["cgroup-memory"]
        assert data["limits"]["memory"]["mechanism"] == "cgroup-v1"
        assert checks["cgroups"]["detail"].startswith(("v1", "hybrid"))
    assert data["elapsed_s"] < BUDGET_S
    assert leftovers() == []


@ROOT_ONLY
def test_the_installed_command_as_a_real_process() -> None:
    exe = shutil.which("ares", path=str(Path(sys.executable).parent))
    command = [exe] if exe else [sys.executable, "-m", "ares.cli.main"]
    started = time.perf_counter()
    result = subprocess.run([*command, "doctor", "--json"], capture_output=True, text=True, timeout=60)
    wall = time.perf_counter() - started
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert {"checks", "backends", "limits", "install"} <= data.keys()
    assert data["checks"]["overlayfs"]["ok"] and data["checks"]["idmapped-mounts"]["ok"]
    assert wall < WALL_BUDGET_S, f"ares doctor took {wall:.2f} s"
    assert leftovers() == []


@pytest.mark.skipif(not can_drop(), reason=SKIP_REASON)
def test_as_nobody_idmapping_is_not_needed_and_limits_fall_back_to_rlimits(tmp_path: Path) -> None:
    python = nobody_python() or pytest.skip(SKIP_REASON)
    home = tmp_path / "home"
    home.mkdir()
    os.chown(home, 65534, 65534)
    os.chmod(tmp_path, 0o755)
    site = sysconfig.get_paths()["purelib"]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "PYTHONPATH": f"{SRC}:{site}"}
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    command = [*drop, python, "-m", "ares.cli.main", "doctor", "--json"]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    checks, limits = data["checks"], data["limits"]
    assert data["root"] is False
    assert checks["user-namespaces"]["ok"] and "65534 outside" in checks["user-namespaces"]["detail"]
    assert checks["overlayfs"]["ok"]
    for name in ("idmapped-mounts", "idmapped-tmpfs"):
        assert checks[name] == {"ok": True, "detail": kernel.NOT_NEEDED, "fix": None}
    assert data["backends"]["local"] == {"ready": True, "detail": "ready (unprivileged mode)"}
    for controller in ("memory", "pids", "cpu"):
        assert not checks[f"cgroup-{controller}"]["ok"]
    assert limits["memory"]["mechanism"] == "rlimit" and limits["pids"]["mechanism"] == "rlimit"
    assert limits["cpu"]["mechanism"] == "unenforced"
    assert limits["disk"]["mechanism"] == "rlimit" and "CAP_SYS_ADMIN" in limits["disk"]["detail"]
    assert data["elapsed_s"] < BUDGET_S
    assert leftovers() == []


def test_a_missing_tool_is_reported_with_its_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    check = network.pasta()
    assert check == Check("pasta", False, check.detail, "apt-get install -y passt")
    assert check.detail.startswith("not found")


def test_human_output_ends_with_the_install_commands(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["doctor"], env={"PATH": str(tmp_path)})
    out = result.stdout
    assert "backends" in out and "limits (local backend)" in out
    block = out[out.index("to install what is missing:") :]
    merged = next(line.strip() for line in block.splitlines() if "apt-get install -y" in line)
    assert "passt" in merged.split() and "slirp4netns" in merged.split()
    assert "unavailable" in out  # no user-mode networking without pasta or slirp4netns


def test_exit_code_follows_the_local_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = [
        Check("seccomp-library", False, "libseccomp cannot be loaded", "apt-get install -y libseccomp2")
    ]
    monkeypatch.setattr(report, "run_all", lambda: broken)
    code, data = doctor_json()
    assert code == 1 and data["local_ready"] is False
    assert "seccomp-library" in data["backends"]["local"]["detail"]
    assert data["install"][0].endswith("apt-get install -y libseccomp2")


def test_backend_rules_and_install_commands() -> None:
    checks = [
        Check("kernel", True, ""),
        Check("user-namespaces", True, ""),
        Check("overlayfs", True, ""),
        Check("idmapped-mounts", False, "EINVAL"),
        Check("seccomp-kernel", True, ""),
        Check("seccomp-library", True, ""),
        Check("pasta", False, "not found", "apt-get install -y passt"),
        Check("debootstrap", False, "not found", "apt-get install -y debootstrap"),
        Check("docker-sdk", False, "", "pip install 'ares[docker]'"),
        Check("e2b-sdk", False, "", "pip install 'ares[e2b]'"),
        Check("tun-device", False, "", "chmod 0666 /dev/net/tun"),
    ]
    as_root = report.assess(checks, root=True)
    assert not as_root.local_ready and as_root.backends[0].detail == "missing: idmapped-mounts (root mode)"
    assert as_root.install == (
        "apt-get install -y passt debootstrap",
        "pip install 'ares[docker,e2b]'",
        "chmod 0666 /dev/net/tun",
    )
    unprivileged = report.assess(checks, root=False)
    assert unprivileged.local_ready  # idmapped layers are a root-mode need only
    assert unprivileged.install[0] == "sudo apt-get install -y passt debootstrap"
    assert {b.name: b.ready for b in unprivileged.backends}["docker"] is False


def test_a_failing_kernel_probe_says_which_step_failed(tmp_path: Path) -> None:
    result = run_python(["-I", "-S", kernel.PROBE_SCRIPT, "overlay", str(tmp_path / "missing")])
    assert result["ok"] is False and "No such file or directory" in result["detail"]


def test_cgroup_v2_delegation_rules(tmp_path: Path) -> None:
    own = tmp_path / "user.slice" / "ares"
    own.mkdir(parents=True)
    (own / "cgroup.subtree_control").write_text("memory pids\n")
    assert cgroups._v2_delegation(own, tmp_path, "memory") is None
    problem = cgroups._v2_delegation(own, tmp_path, "cpu")
    assert problem is not None and "holds processes" in problem
    assert cgroups._v2_delegation(tmp_path / "user.slice", tmp_path / "user.slice", "cpu") is not None
    (tmp_path / "user.slice" / "cgroup.subtree_control").write_text("")
    assert cgroups._v2_delegation(tmp_path / "user.slice", tmp_path / "user.slice", "cpu") is None
