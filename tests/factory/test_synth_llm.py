"""The LLM strategies and the statement writer with real policies (scripted, null, oracle) on a small
package: what is asked, what is spliced (only the function, in the file's own style), what is refused
and counted, and that a resumed run asks nothing twice."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from mutate_helpers import git, git_apply

from ares.factory.asking import Asker, PolicySpec
from ares.factory.llm_bugs import LLM_MODIFY, LLM_REWRITE, llm_mutations
from ares.factory.mutate import Mutation, diff
from ares.factory.writer import written_statement

MODULE = textwrap.dedent(
    '''\
    """Numbers."""
    import math


    def clamp(value, low, high):
        """``value`` within [low, high]."""
        if value < low:
            return low  # the floor
        if value > high:
            return high
        return value


    class Scale:
        """Scales values."""

        def apply(self, values):
            out = []
            for value in values:
                out.append(value * self.factor)
            return out


    def short(x):
        return math.floor(x)
    '''
)
BUGGY_CLAMP = '''Here is the function:

```python
def clamp(value, low, high):
    """``value`` within [low, high]."""
    if value <= low:  # BUG: should be <
        return low  # the floor
    if value > high:
        return high
    return value
```
'''


def script(tmp_path: Path, *answers: str, name: str = "script.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps({"content": answer}) + "\n" for answer in answers))
    return path


def scripted(tmp_path: Path, answer: str, name: str = "script.jsonl") -> Asker:
    return Asker.of(PolicySpec("scripted", {"script": script(tmp_path, answer, name=name)}))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "pkg" / "tests").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "mod.py").write_text(MODULE)
    (root / "pkg" / "tests" / "test_mod.py").write_text(
        "def test_a():\n    x = 1\n    y = 2\n    assert x < y\n"
    )
    return root


async def bugs(project: Path, asker: Asker, strategy: str, cache: Path) -> tuple[list[Mutation], dict]:
    return await llm_mutations(project, ["pkg"], asker, [strategy], functions=20, cache=cache)


async def test_asking_returns_the_text_and_counts_what_fails(tmp_path: Path) -> None:
    asker = scripted(tmp_path, "an answer")
    assert await asker.ask("system", "question") == "an answer" and asker.name == "scripted"
    null = Asker.of(PolicySpec("null"))  # submits at once: no text
    oracle = Asker.of(PolicySpec("oracle"))  # the synthetic task has no reference solution
    assert await null.ask("system", "question") is None and await oracle.ask("system", "q") is None
    assert null.report()["error:empty"] == 1 and oracle.counts["error:PolicyError"] == 1
    assert "reference solution" in oracle.report()["errors"][0]


async def test_modify_splices_the_bug_into_that_function_only(project: Path, tmp_path: Path) -> None:
    asker = scripted(tmp_path, BUGGY_CLAMP)
    made, report = await bugs(project, asker, LLM_MODIFY, tmp_path / "cache.jsonl")
    # Two functions qualify (clamp, Scale.apply); the scripted policy answers clamp both times.
    assert report["functions"] == 2
    assert report["by_strategy"][LLM_MODIFY] == {
        "answers": 2, "questions": 2, "refused:wrong_function": 1, "spliced": 1,
    }  # fmt: skip
    (bug,) = made
    assert (bug.strategy, bug.qualname, bug.author, bug.path) == (
        LLM_MODIFY,
        "clamp",
        "scripted",
        "pkg/mod.py",
    )
    patch = diff(bug)
    changed = [line for line in patch.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert changed == ["-    if value < low:", "+    if value <= low:"]  # no "BUG" comment, rest kept
    git(project, "init", "-q")
    assert git_apply(project, patch, "--check").returncode == 0


async def test_rewrite_asks_from_the_signature_and_keeps_the_file_style(
    project: Path, tmp_path: Path
) -> None:
    answer = (
        "```python\ndef apply(self, values):\n  return [v * self.factor for v in values[1:]]\n```\n"
        "Example:\n```python\nprint(Scale().apply([1]))\n```"
    )
    asker = scripted(tmp_path, answer)
    made, report = await bugs(project, asker, LLM_REWRITE, tmp_path / "cache.jsonl")
    assert report["by_strategy"][LLM_REWRITE]["spliced"] == 1
    (bug,) = made
    assert bug.qualname == "Scale.apply" and bug.line == 18
    assert "        return [v * self.factor for v in values[1:]]\n" in bug.after  # the class's indentation
    head, tail = MODULE.split("    def apply")[0], MODULE.split("return out\n")[1]
    assert bug.after.startswith(head) and bug.after.endswith(tail)


async def test_rewrite_prompt_shows_no_body(project: Path, tmp_path: Path) -> None:
    from ares.factory.llm_bugs import prompt
    from ares.factory.mutate.functions import file_functions

    clamp = next(f for f in file_functions(project, "pkg/mod.py") if f.name == "clamp")
    asked = prompt(LLM_REWRITE, clamp)
    assert '"""``value`` within [low, high]."""' in asked and "def clamp(value, low, high):" in asked
    assert "return high" not in asked and "return high" in prompt(LLM_MODIFY, clamp)


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("```python\ndef clamp(value, low, high)\n    return value\n```", "unparseable"),
        ("I cannot help with that.", "unparseable"),
        ("```python\ndef clip(value, low, high):\n    return low\n```", "wrong_function"),
        (
            "```python\nimport os\n\ndef clamp(value, low, high):\n    return low\n```",
            "code_outside_function",
        ),
        (  # the same code: other comments, docstring and formatting
            "```python\ndef clamp(value, low, high):\n    '''Clamp.'''\n    if value < low: return low\n"
            "    if value > high:  # top\n        return high\n    return (value)\n```",
            "identical",
        ),
    ],
)
async def test_answers_that_are_no_bug_of_that_function_are_refused(
    project: Path, tmp_path: Path, answer: str, reason: str
) -> None:
    asker = scripted(tmp_path, answer)
    made, report = await bugs(project, asker, LLM_MODIFY, tmp_path / "cache.jsonl")
    counts = report["by_strategy"][LLM_MODIFY]
    assert made == [] and counts["answers"] == 2 and counts.get(f"refused:{reason}", 0) >= 1


async def test_a_resumed_run_asks_nothing_twice(project: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache.jsonl"
    first = scripted(tmp_path, BUGGY_CLAMP)
    made, _ = await bugs(project, first, LLM_MODIFY, cache)
    again = scripted(tmp_path, BUGGY_CLAMP, name="other.jsonl")
    made_again, _ = await bugs(project, again, LLM_MODIFY, cache)
    assert made == made_again and first.counts["asked"] == 2 and again.counts["asked"] == 0


FIX = (
    "diff --git a/pkg/mod.py b/pkg/mod.py\n--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -6 +6 @@\n"
    "-    if value <= low:\n+    if value < low:\n"
)


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        ("clamp: values at the lower bound are wrong\n\nclamp(1, 1, 5) no longer returns 1.", "written"),
        ("It looks like `if value <= low:` should be `<`.", "leaks"),
        ("The bug is in pkg/mod.py.", "leaks"),
    ],
)
async def test_a_writer_statement_never_gives_the_fix_away(tmp_path: Path, answer: str, outcome: str) -> None:
    writer = scripted(tmp_path, answer)
    failures = {"test_clamp_low": ["assert 0 == 1"]}
    text, said = await written_statement(
        writer, "proj", ["pkg/tests/test_mod.py::test_clamp_low"], failures, patch=FIX, paths=["pkg/mod.py"]
    )
    assert said == outcome and (text == answer + "\n" if outcome == "written" else text is None)


async def test_the_writer_is_told_tests_and_assertions_never_files() -> None:
    from ares.factory.writer import prompt

    asked = prompt(
        "proj", ["pkg/tests/test_mod.py::TestClamp::test_low[a]"], {"TestClamp.test_low": ["assert 0 == 1"]}
    )
    assert "TestClamp.test_low" in asked and "assert 0 == 1" in asked and "test_mod.py" not in asked


async def test_a_silent_writer_counts_as_no_answer() -> None:
    text, said = await written_statement(
        Asker.of(PolicySpec("null")), "p", ["t.py::test_x"], {}, patch=FIX, paths=[]
    )
    assert (text, said) == (None, "no_answer")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--llm-policy", "gpt-17"], "unknown policy 'gpt-17'"),
        (["--writer", "scripted"], "--writer scripted needs --policy-script FILE.jsonl"),
        (["--strategies", "llm_modify"], "need --llm-policy SPEC"),
        (
            ["--llm-policy", "null", "--policy-script", "x.jsonl"],
            "--policy-script: not an option of --llm-policy null",
        ),
    ],
)
def test_the_cli_refuses_bad_policy_options(tmp_path: Path, args: list[str], message: str) -> None:
    command = ["tasks", "synth", str(tmp_path), "--out", str(tmp_path / "o"), *args]
    done = subprocess.run([sys.executable, "-m", "ares.cli.main", *command], capture_output=True, text=True)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
