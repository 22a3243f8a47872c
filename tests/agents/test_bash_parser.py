from __future__ import annotations

import pytest

from ares.agents.bash_parser import FormatError, code_blocks, parse_action
from ares.errors import AgentError


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("Let me look.\n```bash\nls -la\n```", "ls -la"),
        ("```bash\nls\n```", "ls"),
        ("thought\n```sh\npwd\n```\n", "pwd"),
        ("thought\n```shell\npwd\n```\n", "pwd"),
        ("thought\n```BASH\npwd\n```\n", "pwd"),
        ("info string\n```bash title=run.sh\necho hi\n```", "echo hi"),
        ("space before info\n``` bash\necho hi\n```", "echo hi"),
        ("multi-line\n```bash\ncd src &&\n  make test\n```", "cd src &&\n  make test"),
        ("surrounding blank lines\n```bash\n\n\n  ls  \n\n```\n", "ls"),
        ("\n\n   ```bash\n   ls\n   ```   \n\n", "ls"),  # fences indented up to three spaces
        ("indented fence dedents content\n  ```bash\n  a\n    b\n```", "a\n  b"),
        ("crlf\r\n```bash\r\nls -l\r\necho done\r\n```\r\n", "ls -l\necho done"),
        ("old mac line ends\r```bash\rls\r```", "ls"),
        ("a longer closing fence closes\n```bash\nls\n`````", "ls"),
        ("trailing text after\n```bash\nls\n```\nThen I will read the output.", "ls"),
        ("inline ```bash``` mention is not a fence\n```bash\nls\n```", "ls"),
    ],
)
def test_parses_the_single_shell_block(text: str, command: str) -> None:
    assert parse_action(text) == command


def test_long_fence_keeps_inner_backtick_lines() -> None:
    text = "Write a README.\n````bash\ncat <<'EOF' > README.md\n```python\nprint(1)\n```\nEOF\n````\n"
    assert parse_action(text) == "cat <<'EOF' > README.md\n```python\nprint(1)\n```\nEOF"


def test_shorter_backtick_line_does_not_close_a_long_fence() -> None:
    assert parse_action("`````bash\necho '````'\n````\n`````") == "echo '````'\n````"


def test_other_blocks_are_ignored() -> None:
    text = (
        "The file contains:\n```python\ndef f():\n    pass\n```\n"
        "and the log said:\n```\nerror\n```\nSo:\n```bash\npytest -x\n```"
    )
    assert parse_action(text) == "pytest -x"


def test_shell_block_nested_in_another_block_is_content() -> None:
    text = "````markdown\n```bash\nrm -rf /\n```\n````\n```bash\nls\n```"
    assert parse_action(text) == "ls"


def test_no_block() -> None:
    with pytest.raises(FormatError, match="no ```bash block"):
        parse_action("I think the bug is in main.py.")


def test_bare_block_is_not_run_and_the_error_says_to_label_it() -> None:
    with pytest.raises(FormatError, match="without a language"):
        parse_action("```\nls\n```")


def test_only_other_languages() -> None:
    with pytest.raises(FormatError, match="no ```bash block"):
        parse_action("```python\nprint(1)\n```")


def test_two_blocks() -> None:
    with pytest.raises(FormatError, match="2 ```bash blocks"):
        parse_action("```bash\nls\n```\nand then\n```sh\npwd\n```")


def test_unclosed_block() -> None:
    with pytest.raises(FormatError, match="never closed"):
        parse_action("Let me run\n```bash\nls -la")


def test_closing_fence_shorter_than_opening_leaves_block_open() -> None:
    with pytest.raises(FormatError, match="never closed"):
        parse_action("````bash\nls\n```")


@pytest.mark.parametrize("text", ["```bash\n```", "```bash\n   \n\n```", "```sh\n\t\n```"])
def test_empty_block(text: str) -> None:
    with pytest.raises(FormatError, match="empty"):
        parse_action(text)


def test_empty_reply() -> None:
    with pytest.raises(FormatError):
        parse_action("")


def test_format_error_is_an_agent_error() -> None:
    assert issubclass(FormatError, AgentError)


def test_code_blocks_reports_language_body_and_closure() -> None:
    blocks = code_blocks("```py x\na\n```\n```\nb")
    assert [(b.language, b.body, b.closed) for b in blocks] == [("py", "a", True), ("", "b", False)]
