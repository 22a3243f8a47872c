"""Problem statements written by a policy (``--writer``) from what a user of the project would see.

The policy is told the project's name, the failing tests' names and their assertion lines, never
the diff nor the fixed file. Its text must still pass ``statements.quotes_the_diff`` (a model may
guess a changed line or the file); a leaking, empty or failed answer means the template statement
is used instead, and the reason is counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ares.factory import statements
from ares.factory.asking import Asker

SYSTEM = (
    "You are a user of an open-source Python library filing an issue. Write a short, clear bug report: "
    "a title line, what you observed, and what you expected. Describe behaviour only; do not guess "
    "where in the code the bug is and do not propose a fix."
)


def prompt(project: str, failing: Sequence[str], failures: Mapping[str, Sequence[str]]) -> str:
    """The user message: project, failing tests by name (no file paths), their assertion lines."""
    lines = [f"The project is {project}. After a recent change these tests fail:", ""]
    for test in failing[: statements.MAX_TESTS]:
        name = statements.block_name(test)
        lines.append(f"- {name}")
        lines += [f"    {line}" for line in failures.get(name, ())]
    if len(failing) > statements.MAX_TESTS:
        lines.append(f"- ... and {len(failing) - statements.MAX_TESTS} more")
    lines += ["", "Write the issue report."]
    return "\n".join(lines)


async def written_statement(
    asker: Asker,
    project: str,
    failing: Sequence[str],
    failures: Mapping[str, Sequence[str]],
    *,
    patch: str,
    paths: Sequence[str],
) -> tuple[str | None, str]:
    """The policy's statement and "written", or None and why not ("no_answer", "leaks: ...")."""
    answer = await asker.ask(SYSTEM, prompt(project, failing, failures), purpose="statement")
    if answer is None or not answer.strip():
        return None, "no_answer"
    text = answer.strip() + "\n"
    leak = statements.quotes_the_diff(text, patch, paths)
    if leak is not None:
        return None, "leaks"
    return text, "written"
