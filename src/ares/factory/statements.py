"""Problem statements for synthesized bugs, in the style of an issue report, from the failing tests.

A statement says what goes wrong (which behaviour, the assertion that fails) and never where: no
file of the fix, no line number, no line of the diff. Two sources feed the templates: the failing
tests' names (humanized) and the ``E`` lines of pytest's failure report, with paths and line numbers
removed. ``quotes_the_diff`` is the check every statement (template or policy-written) must pass.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

#: pytest's failure block header: ``____ test_name ____`` or ``____ Class.test_name ____``.
_BLOCK = re.compile(r"^_{3,} (?P<name>\S.*?) _{3,}$")
#: A location in a traceback (``pkg/mod.py:123``) or a bare line reference.
_LOCATION = re.compile(r"[\w./-]+\.py(:\d+)?|\bline \d+\b")
#: At most this many assertion lines per test, and tests per statement.
MAX_LINES_PER_TEST = 4
MAX_TESTS = 5
#: A changed line shorter than this is too generic to count as quoting the diff (``return x``).
MIN_QUOTE = 12


def failure_lines(log: str) -> dict[str, list[str]]:
    """``E`` lines of each failure block in a ``pytest -rA`` log, paths and line numbers removed."""
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for raw in log.splitlines():
        header = _BLOCK.match(raw.strip())
        if header:
            current = blocks.setdefault(header.group("name").split("[")[0], [])
            continue
        if raw.startswith(("=", "- ")) and current is not None and raw.strip("=- ").startswith("short test"):
            current = None
        if current is not None and raw.startswith("E "):
            line = _LOCATION.sub("<...>", raw[1:].strip())
            if line and line not in current and len(current) < MAX_LINES_PER_TEST:
                current.append(line)
    return blocks


def block_name(test_id: str) -> str:
    """The name pytest gives a test's failure block: ``path::Class::test[id]`` -> ``Class.test``."""
    return ".".join(test_id.split("::")[1:]).split("[")[0] or test_id


def humanize(test_id: str) -> str:
    """``pkg/tests/test_x.py::TestTail::test_tail_of_iterator[a]`` -> ``tail of iterator``."""
    name = test_id.split("::")[-1].split("[")[0]
    return name.removeprefix("test_").replace("_", " ").strip() or name


def template_statement(
    project: str, failing: Sequence[str], failures: Mapping[str, Sequence[str]], *, tests_visible: bool
) -> str:
    """An issue report: a title, the behaviours that fail (one line per behaviour, however many tests
    show it), the distinct assertion outputs; test ids only when they are visible."""
    topics: dict[str, list[str]] = {}
    for test in failing:
        topics.setdefault(humanize(test), []).append(test)
    names = list(topics)[:MAX_TESTS]
    title = (
        f"{project}: {names[0]} is broken" if len(topics) == 1 else f"{project}: regressions in {names[0]}"
    )
    lines = [title, "", f"Since the last change, {project} no longer behaves as expected:", ""]
    for topic in names:
        tests = topics[topic]
        seen = f" ({len(tests)} tests)" if len(tests) > 1 else ""
        ids = f": {', '.join(f'`{t}`' for t in tests[:MAX_TESTS])}" if tests_visible else ""
        lines.append(f"- {topic}{seen}{ids}")
    if len(topics) > len(names):
        lines.append(f"- ... and {len(topics) - len(names)} more")
    outputs: list[tuple[str, tuple[str, ...]]] = []
    for topic in names:
        for test in topics[topic]:
            found = tuple(failures.get(block_name(test)) or ())
            if found and all(found != known for _, known in outputs):
                outputs.append((topic, found))
    if outputs:
        lines += ["", "What I see:", ""]
        for topic, found in outputs[:MAX_TESTS]:
            lines += ["```", f"# {topic}", *found, "```", ""]
    lines += ["", "This used to work. Please fix the library so that it behaves correctly again."]
    return "\n".join(lines).rstrip() + "\n"


def quotes_the_diff(text: str, diff: str, paths: Sequence[str] = ()) -> str | None:
    """Why ``text`` gives the fix away (a changed line or a fixed file named), or None."""
    for path in paths:
        if path in text or path.rsplit("/", 1)[-1] in text:
            return f"names the file {path}"
    for line in diff.splitlines():
        if line.startswith(("+++", "---")) or not line.startswith(("+", "-")):
            continue
        body = line[1:].strip()
        if len(body) >= MIN_QUOTE and body in text:
            return f"quotes a changed line: {body!r}"
    return None
