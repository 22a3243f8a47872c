"""Dockerfile syntax: continuations, directives, heredocs, flags, substitution, clear errors."""

from __future__ import annotations

import pytest

from ares.images.build.dockerfile import DockerfileError, expand, key_values, parse_dockerfile, split_words


def test_continuations_comments_and_forms() -> None:
    text = """
# a comment
FROM python:3.11-slim AS base
RUN apt-get update && \\
    # comments inside a continuation are dropped
    apt-get install -y curl

CMD ["python", "-m", "http.server"]
copy --chown=app:app --chmod=644 a.txt /a.txt
"""
    ins = parse_dockerfile(text)
    assert [i.keyword for i in ins] == ["FROM", "RUN", "CMD", "COPY"]
    assert ins[1].args == "apt-get update && apt-get install -y curl"
    assert ins[1].line == 4
    assert ins[2].json_args == ["python", "-m", "http.server"]
    assert ins[1].json_args is None
    assert ins[3].flags == {"chown": "app:app", "chmod": "644"}
    assert ins[3].args == "a.txt /a.txt"


def test_escape_directive() -> None:
    ins = parse_dockerfile("# escape=`\nFROM debian\nRUN echo a `\n  b\n")
    assert ins[1].args == "echo a b"


def test_heredocs() -> None:
    text = (
        "FROM debian\nRUN <<EOF\necho one\necho two\nEOF\nCOPY <<-'CONF' /etc/app.conf\n\tkey=$HOME\n\tCONF\n"
    )
    run, copy = parse_dockerfile(text)[1:]
    assert run.heredocs[0].body == "echo one\necho two\n"
    assert run.heredocs[0].expand
    assert copy.heredocs[0].body == "key=$HOME\n"
    assert not copy.heredocs[0].expand and copy.heredocs[0].strip_tabs


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no instructions"),
        ("RUN echo\n", "must start with FROM"),
        ("FROM debian\nFROBNICATE x\n", "unknown instruction 'FROBNICATE'"),
        ("FROM debian\nRUN <<EOF\necho\n", "never closed"),
        ("# escape=x\nFROM debian\n", "escape must be"),
    ],
)
def test_malformed_dockerfiles_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(DockerfileError, match=message):
        parse_dockerfile(text)


def test_words_pairs_and_substitution() -> None:
    assert split_words("a \"b c\" d\\ e 'f g'") == ["a", "b c", "d e", "f g"]
    assert key_values('A=1 B="two words"', "ENV", 1) == [("A", "1"), ("B", "two words")]
    assert key_values("LEGACY some value", "ENV", 1) == [("LEGACY", "some value")]
    assert key_values("VERSION", "ARG", 1) == [("VERSION", "")]
    variables = {"A": "x", "EMPTY": ""}
    assert expand("$A-${A}-${MISSING:-dflt}-${A:+alt}-${EMPTY:+alt}-\\$A", variables) == "x-x-dflt-alt--$A"
    with pytest.raises(DockerfileError, match="KEY=VALUE"):
        key_values("A=1 junk", "ENV", 3)
