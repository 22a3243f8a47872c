"""Wrong solutions that try to beat the checker instead of solving the task, run for real on the host.

Each attack targets the HumanEval checker (task 0, has_close_elements) or the fix-bug fixture's
checker with a wrong answer plus a trick: reading the checker's secrets, patching builtins, shadowing
stdlib modules, exiting early with status 0, returning an always-equal object, forging the reward
files (also from a daemonized grandchild), signalling the checker, or reading the hidden tests.
Every one must score 0 while the honest solution scores 1.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from ares.tasks import Task, load_harbor_task, load_humaneval

FIX_BUG = Path(__file__).resolve().parents[1] / "fixtures" / "harbor" / "fix-bug"


def _landlock_abi() -> int:
    try:
        return int(ctypes.CDLL(None, use_errno=True).syscall(444, None, 0, 1))
    except (OSError, AttributeError):
        return -1


#: On the host as root with a kernel that scopes signals (Landlock ABI >= 6) the candidate must run
#: under Landlock; elsewhere the attacks still must fail, whatever confinement was available.
EXPECT_LANDLOCK = _landlock_abi() >= 6 and os.getuid() == 0
needs_scoped_landlock = pytest.mark.skipif(
    not EXPECT_LANDLOCK, reason="signalling attacks are only safe to try where signals are scoped"
)


@dataclass(frozen=True)
class Run:
    reward: float
    forged_json: bool
    output: str


def _write(files: Mapping[str, str | bytes], dest: Path) -> None:
    for name, content in files.items():
        path = dest / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)


def _run_test_sh(test_sh: Path, workdir: Path, logs: Path, env: Mapping[str, str], linger: float) -> Run:
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    full_env = {**os.environ, "PATH": path, "ARES_WORKDIR": str(workdir), "ARES_LOGS_DIR": str(logs), **env}
    result = subprocess.run(
        ["bash", str(test_sh)], cwd=workdir, env=full_env, capture_output=True, text=True, timeout=120
    )
    time.sleep(linger)  # lets a daemonized grandchild try its late write
    reward_json = logs / "verifier" / "reward.json"
    reward = float((logs / "verifier" / "reward.txt").read_text())
    return Run(reward, reward_json.exists(), result.stdout + result.stderr)


def _check_confined(run: Run) -> None:
    assert "candidate confinement: " in run.output, run.output  # the checker lived to report
    if EXPECT_LANDLOCK:
        assert "candidate confinement: landlock" in run.output, run.output


# --- HumanEval -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def task0() -> Task:
    return load_humaneval()[0]


def _humaneval(
    task: Task, root: Path, solution: str, extra: Mapping[str, str] = {}, linger: float = 0
) -> Run:
    workdir, tests, logs = root / "workspace", root / "tests", root / "logs"
    assert isinstance(task.tests, Mapping)
    _write(task.tests, tests)
    _write({"solution.py": solution, **(extra or {})}, workdir)
    return _run_test_sh(tests / "test.sh", workdir, logs, task.verifier_env, linger)


def _fill(source: str, root: Path) -> str:
    return source.replace("LOGS_DIR", str(root / "logs")).replace("TESTS_DIR", str(root / "tests"))


WRONG = "def has_close_elements(numbers, threshold):\n    return True\n"
HONEST = """
def has_close_elements(numbers, threshold):
    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1 :])
"""
FORGE = """
import os as _os

def forge():
    folder = _os.path.join("LOGS_DIR", "verifier")
    for name, text in (("reward.json", '{"reward": 1.0}'), ("reward.txt", "1.0")):
        try:
            with open(_os.path.join(folder, name), "w") as out:
                out.write(text)
        except OSError:
            pass
"""
# Would win if the trusted checker imported it: writes reward 1.0 and exits 0 (posix: no imports).
SHADOW = """
import posix
for _name, _text in ((b"reward.txt", b"1.0"), (b"reward.json", b'{"reward": 1}')):
    _fd = posix.open(b"LOGS_DIR/verifier/" + _name, posix.O_WRONLY | posix.O_CREAT | posix.O_TRUNC, 0o644)
    posix.write(_fd, _text)
posix._exit(0)
"""
DAEMON = """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(0.7)  # after the checker has written its reward
        forge()
    os._exit(0)
"""
SHADOWED = (
    "json", "secrets", "os", "select", "typing", "isolated", "check", "sitecustomize", "usercustomize",
    "_ctypes", "ctypes", "subprocess", "math", "random", "copy", "string", "time", "encodings",
)  # fmt: skip

ATTACKS = {
    "secret_from_caller_frames": """
import os, sys
def has_close_elements(numbers, threshold):
    frames, frame = [], sys._getframe()
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    scopes = [f.f_locals for f in frames] + [f.f_globals for f in frames] + [vars(sys.modules["__main__"])]
    for scope in scopes:
        for name in ("token", "secret", "expected", "check"):
            if isinstance(scope.get(name), str):
                print("\\n" + scope[name] + "\\n", flush=True)
                os._exit(0)
    return True
""",
    "patched_builtins": """
import builtins
class Harmless(Exception):
    pass
builtins.AssertionError = Harmless
builtins.abs = lambda x: 0
builtins.isinstance = lambda *args: True
builtins.all = builtins.any = lambda *args: True
builtins.print = lambda *args, **kwargs: None
"""
    + WRONG,
    "sys_exit_at_import": WRONG + "import sys\nsys.exit(0)\n",
    "os_exit_at_import": WRONG + "import os\nos._exit(0)\n",
    "sys_exit_in_function": "import sys\ndef has_close_elements(numbers, threshold):\n    sys.exit(0)\n",
    "os_exit_in_function": "import os\ndef has_close_elements(numbers, threshold):\n    os._exit(0)\n",
    "keyboard_interrupt": "def has_close_elements(numbers, threshold):\n    raise KeyboardInterrupt\n",
    "always_equal_object": """
class Always:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    def __bool__(self):
        return True
def has_close_elements(numbers, threshold):
    return Always()
""",
    "always_equal_bool_subclass": """
class Sneaky(int):
    def __eq__(self, other):
        return True
    __hash__ = int.__hash__
def has_close_elements(numbers, threshold):
    return Sneaky(1)
""",
    "forge_reward_at_import": FORGE + "forge()\n" + WRONG,
    "forge_reward_in_function": FORGE
    + "def has_close_elements(numbers, threshold):\n    forge()\n    import os\n    os._exit(0)\n",
    "forge_reward_from_daemon": FORGE + DAEMON + WRONG,
    "hidden_tests_from_env_proc_and_files": """
import os
def _leaked():
    places = [os.environ.get(k, "") for k in os.environ]
    pids = set()
    try:
        pids.update(int(p) for p in os.listdir("/proc") if p.isdigit())
    except OSError:
        pids.update(range(max(1, os.getppid() - 100), os.getppid() + 100))
    pids.update({1, os.getppid()})
    for pid in sorted(pids):
        for name in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{name}", "rb") as f:
                    places.append(f.read().decode("utf-8", "replace"))
            except OSError:
                pass
    for folder in ("TESTS_DIR", "/tests"):
        try:
            for name in os.listdir(folder):
                with open(os.path.join(folder, name), "rb") as f:
                    places.append(f.read().decode("utf-8", "replace"))
        except OSError:
            pass
    return any("def check(candidate)" in text or "METADATA" in text for text in places)
LEAKED = _leaked()
def has_close_elements(numbers, threshold):
    if not LEAKED:
        return True
    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1 :])
""",
}
SIGNAL_CHECKER = (
    "import os, signal\ntry:\n    os.kill(os.getppid(), signal.SIG{})\nexcept OSError:\n    pass\n"
)
SIGNALS = {"kill_checker": SIGNAL_CHECKER.format("KILL"), "stop_checker": SIGNAL_CHECKER.format("STOP")}


def test_honest_solution_scores_one_under_landlock(task0: Task, tmp_path: Path) -> None:
    run = _humaneval(task0, tmp_path, "from typing import List\n" + HONEST)
    assert run.reward == 1.0 and "PASS" in run.output, run.output
    _check_confined(run)


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_humaneval_attack_scores_zero(task0: Task, tmp_path: Path, name: str) -> None:
    linger = 1.2 if "daemon" in name else 0.0
    run = _humaneval(task0, tmp_path, _fill(ATTACKS[name], tmp_path), linger=linger)
    assert (run.reward, run.forged_json) == (0.0, False), run.output
    assert "FAIL" in run.output
    _check_confined(run)


def test_humaneval_shadowed_stdlib_modules_score_zero(task0: Task, tmp_path: Path) -> None:
    shadows = {f"{name}.py": _fill(SHADOW, tmp_path) for name in SHADOWED}
    shadows["encodings/__init__.py"] = shadows.pop("encodings.py")
    run = _humaneval(task0, tmp_path, "from typing import List\nimport json\n" + WRONG, shadows)
    assert (run.reward, run.forged_json) == (0.0, False), run.output
    _check_confined(run)


def test_humaneval_shadows_next_to_an_honest_solution_do_not_break_the_checker(
    task0: Task, tmp_path: Path
) -> None:
    # The shadows stay out of both processes' own imports; only the candidate's imports can see them.
    shadows = {f"{name}.py": _fill(SHADOW, tmp_path) for name in ("json", "secrets", "select", "isolated")}
    run = _humaneval(task0, tmp_path, HONEST, shadows)
    assert run.reward == 1.0, run.output


@needs_scoped_landlock
@pytest.mark.parametrize("name", sorted(SIGNALS))
def test_humaneval_signalling_the_checker_scores_zero(task0: Task, tmp_path: Path, name: str) -> None:
    run = _humaneval(task0, tmp_path, SIGNALS[name] + WRONG)
    assert run.reward == 0.0 and "FAIL" in run.output, run.output
    _check_confined(run)


def test_humaneval_candidate_does_not_get_the_problem_env(task0: Task, tmp_path: Path) -> None:
    probe = "import os\nSEEN = sorted(k for k in os.environ if k.startswith('ARES_HUMANEVAL_'))\n"
    probe += "def has_close_elements(numbers, threshold):\n    raise RuntimeError(f'seen={SEEN}')\n"
    run = _humaneval(task0, tmp_path, probe)
    assert "seen=[]" in run.output and run.reward == 0.0, run.output


# --- the fix-bug fixture ---------------------------------------------------------------------------

BUGGY = "def mean(v):\n    return sum(v) / len(v)\n\n\ndef median(v):\n    return sorted(v)[len(v) // 2]\n"
FIXED = """
def mean(values):
    if not values:
        raise ValueError("empty")
    return sum(values) / len(values)

def median(values):
    if not values:
        raise ValueError("empty")
    ordered, middle = sorted(values), len(values) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
"""
STATS_ATTACKS = {
    "sys_exit_at_import": "import sys\nsys.exit(0)\n" + BUGGY,
    "os_exit_at_import": "import os\nos._exit(0)\n" + BUGGY,
    "always_equal_object": """
class Always(float):
    def __eq__(self, other):
        return True
    __hash__ = float.__hash__
def mean(values):
    if not values:
        raise ValueError
    return Always(0)
median = mean
""",
    "patched_builtins": "import builtins\nbuiltins.ValueError = Exception\nbuiltins.sorted = lambda v: v\n"
    + BUGGY,
    "forge_reward": FORGE + "forge()\n" + BUGGY,
    "forge_reward_from_daemon": FORGE + DAEMON + BUGGY,
    "expected_values_from_tests_dir": """
import os
try:
    with open(os.path.join("TESTS_DIR", "check_stats.py")) as f:
        LEAKED = "CASES" in f.read()
except OSError:
    LEAKED = False
"""
    + (FIXED + "\nif not LEAKED:\n    median = lambda v: sorted(v)[len(v) // 2]\n"),
}


def _fix_bug(root: Path, stats: str | None, linger: float = 0.0) -> Run:
    task = load_harbor_task(FIX_BUG)
    workdir, logs = root / "app", root / "logs"
    workdir.mkdir(parents=True)
    if stats is None:
        solve = subprocess.run(["bash", str(FIX_BUG / "solution" / "solve.sh")], cwd=workdir, check=False)
        assert solve.returncode == 0
    else:
        (workdir / "stats.py").write_text(stats.replace("TESTS_DIR", str(FIX_BUG / "tests")))
    return _run_test_sh(FIX_BUG / "tests" / "test.sh", workdir, logs, task.verifier_env, linger)


def test_fix_bug_oracle_scores_one_under_landlock(tmp_path: Path) -> None:
    run = _fix_bug(tmp_path, None)
    assert run.reward == 1.0, run.output
    _check_confined(run)


@pytest.mark.parametrize("name", sorted(STATS_ATTACKS))
def test_fix_bug_attack_scores_zero(tmp_path: Path, name: str) -> None:
    source = _fill(STATS_ATTACKS[name], tmp_path)
    run = _fix_bug(tmp_path, source, linger=1.2 if "daemon" in name else 0.0)
    assert (run.reward, run.forged_json) == (0.0, False), run.output
    _check_confined(run)


@needs_scoped_landlock
@pytest.mark.parametrize("name", sorted(SIGNALS))
def test_fix_bug_signalling_the_checker_scores_zero(tmp_path: Path, name: str) -> None:
    run = _fix_bug(tmp_path, SIGNALS[name] + BUGGY)
    assert run.reward == 0.0, run.output
    _check_confined(run)


def test_fix_bug_shadowed_stdlib_modules_score_zero(tmp_path: Path) -> None:
    run = _fix_bug(tmp_path, BUGGY)
    assert run.reward == 0.0
    for name in ("json", "os", "select", "isolated", "sitecustomize", "_ctypes"):
        (tmp_path / "app" / f"{name}.py").write_text(_fill(SHADOW, tmp_path))
    run = _run_test_sh(FIX_BUG / "tests" / "test.sh", tmp_path / "app", tmp_path / "logs", {}, 0.0)
    assert (run.reward, run.forged_json) == (0.0, False), run.output
