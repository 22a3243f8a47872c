"""Recognise a dataset row's shape and turn it into a ``SweInstance``.

Each public SWE dataset spells the same task slightly differently. Detection looks at the keys that
set a shape apart; parsing is strict (a missing or mistyped field is a ``TaskError`` naming the row and
the field) so that a bad row fails at load time rather than mid-episode.

Formats, how each is detected, and how it maps onto ``SweInstance``:

- ``swebench`` (4.x): SWE-bench keys, FAIL_TO_PASS/PASS_TO_PASS as JSON text. Same names, lowercased;
  the test lists decoded to tuples.
- ``swebench5``: plus any of ``image``/``eval_script``/``log_parser``, kept per instance.
- ``swegym``: SWE-bench keys with real lists. As swebench; its image is named the SWE-Gym way.
- ``swesmith``: ``image_name``. ``patch`` is the bug: kept as ``bug_patch``, ``patch`` is its
  reverse (the fix); no test_patch (the tests are in the repo); ``image_name`` -> ``image``;
  base_commit defaults to the instance id (SWE-smith's branch per bug).
- ``swerebench``: ``install_config`` or ``docker_image`` next to ``instance_id``. As swebench;
  ``docker_image`` -> ``image``; ``install_config.test_cmd`` (a list: its last entry, the harness's
  rule) -> ``test_cmd``, ``install_config.log_parser`` -> ``log_parser``.
- ``r2egym``: ``expected_output_json`` (or ``repo_name`` + ``docker_image``). ``repo_name`` -> repo,
  ``docker_image`` -> image, id ``<repo_name>-<commit_hash[:12]>``, base_commit from
  ``parsed_commit_content.old_commit_hash``, ``expected_output_json`` -> ``expected_output``,
  the gold diff rebuilt from ``parsed_commit_content``'s non-test files, the hidden tests from
  ``execution_result_content`` (``r2e.py``), test_cmd the image's ``run_tests.sh`` (moved to /root).

Every other key of a row is kept in ``SweInstance.metadata``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ares.errors import TaskError
from ares.tasks.swe import r2e
from ares.tasks.swe.instance import SWE_FORMATS, SweFormat, SweInstance
from ares.tasks.swe.patches import reverse_patch

_SWEBENCH_KEYS = ("instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement")
_SWEBENCH5_KEYS = ("image", "eval_script", "log_parser")
_R2E_TEST_CMD = f"bash {r2e.RUN_TESTS}"

#: Keys copied into named fields (everything else lands in metadata).
_NAMED = frozenset(
    {
        *_SWEBENCH_KEYS,
        *_SWEBENCH5_KEYS,
        "hints_text",
        "version",
        "environment_setup_commit",
        "FAIL_TO_PASS",
        "PASS_TO_PASS",
        "image_name",
        "docker_image",
        "repo_name",
        "expected_output_json",
        "parsed_commit_content",
        "execution_result_content",
    }
)


def detect_format(row: Mapping[str, Any]) -> SweFormat | None:
    """The dataset shape of ``row``, or ``None`` when no supported shape matches."""
    if "expected_output_json" in row or ("repo_name" in row and "docker_image" in row):
        return "r2egym"
    if "image_name" in row:
        return "swesmith"
    if "instance_id" not in row:
        return None
    if "install_config" in row or "docker_image" in row:
        return "swerebench"
    if any(key in row for key in _SWEBENCH5_KEYS):
        return "swebench5"
    if any(key in row for key in (*_SWEBENCH_KEYS[1:], "FAIL_TO_PASS")):  # parsing names what is missing
        f2p = row.get("FAIL_TO_PASS")
        return "swegym" if isinstance(f2p, list | tuple) else "swebench"
    return None


def parse_row(row: Any, *, where: str, format: SweFormat | None = None) -> SweInstance:
    """Parse one dataset row; ``where`` ("file.jsonl line 3") prefixes every error message.

    ``format`` forces a shape (e.g. ``swebench`` for a SWE-bench file written with real lists, which
    detection would call SWE-Gym); otherwise it is detected per row.
    """
    if not isinstance(row, Mapping):
        raise TaskError(f"{where}: a row must be a JSON object, got {type(row).__name__}; fix the file")
    if format is not None and format not in SWE_FORMATS:
        raise TaskError(f"unknown SWE format {format!r}; use one of {', '.join(SWE_FORMATS)}")
    fmt = format or detect_format(row)
    ident = row.get("instance_id")
    fields = _Fields(row, f"{where} ({ident})" if isinstance(ident, str) and ident else where)
    if fmt is None:
        keys = ", ".join(sorted(map(str, row))[:12]) or "none"
        raise TaskError(
            f"{fields.where}: not a known SWE dataset row (keys: {keys}); expected SWE-bench keys "
            f"({', '.join(_SWEBENCH_KEYS)}, FAIL_TO_PASS, PASS_TO_PASS), SWE-smith's image_name, "
            "SWE-rebench's install_config/docker_image or R2E-Gym's expected_output_json"
        )
    parser = {"swesmith": _swesmith, "r2egym": _r2egym}.get(fmt, _swebench_like)
    return parser(fields, fmt)


@dataclass(frozen=True)
class _Fields:
    """A row with typed getters whose errors name the row and the field."""

    row: Mapping[str, Any]
    where: str

    def error(self, key: str, problem: str, fix: str) -> TaskError:
        return TaskError(f"{self.where}: field {key!r} {problem}; {fix}")

    def text(self, key: str, *, required: bool = True, default: str = "") -> str:
        value = self.row.get(key)
        if value is None:
            if required:
                raise self.error(key, "is missing", "add it (a string) to the row")
            return default
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise self.error(key, f"must be a string, got {type(value).__name__}", "write it as a string")
        return str(value)

    def optional(self, key: str) -> str | None:
        value = self.text(key, required=False)
        return value or None

    def nonempty(self, key: str) -> str:
        value = self.text(key)
        if not value.strip():
            raise self.error(key, "is empty", "fill it in")
        return value

    def tests(self, key: str) -> tuple[str, ...]:
        """A list of test ids: a JSON array in a string (SWE-bench) or a real list."""
        value = self.row.get(key)
        if value is None:
            raise self.error(key, "is missing", 'add the test ids, e.g. ["tests/test_x.py::test_y"]')
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise self.error(
                    key, f"is a string but not a JSON list ({exc.msg})", 'write e.g. "[\\"test_a\\"]"'
                ) from exc
        if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
            raise self.error(
                key, f"must be a list of test ids (strings), got {_shape(value)}", "write a list of strings"
            )
        return tuple(value)

    def mapping(self, key: str) -> dict[str, Any]:
        """A JSON object, given as an object or as JSON text."""
        value = self.row.get(key)
        if value is None:
            raise self.error(key, "is missing", "add it (an object)")
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise self.error(key, f"is not valid JSON ({exc.msg})", "write a JSON object") from exc
        if not isinstance(value, Mapping):
            raise self.error(key, f"must be an object, got {_shape(value)}", "write a JSON object")
        return dict(value)

    def extra(self) -> dict[str, Any]:
        return {key: value for key, value in self.row.items() if key not in _NAMED}


def _shape(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


def _swebench_like(fields: _Fields, fmt: SweFormat) -> SweInstance:
    """SWE-bench 4.x/5.x, SWE-Gym and SWE-rebench: the SWE-bench schema plus a few keys."""
    image = test_cmd = log_parser = eval_script = None
    if fmt == "swebench5":
        image, eval_script, log_parser = (fields.optional(key) for key in _SWEBENCH5_KEYS)
    elif fmt == "swerebench":
        image = fields.optional("docker_image")
        if "install_config" in fields.row and fields.row["install_config"] is not None:
            config = _Fields(fields.mapping("install_config"), f"{fields.where} install_config")
            test_cmd = _command(config, "test_cmd")
            log_parser = config.optional("log_parser")
    return SweInstance(
        instance_id=fields.nonempty("instance_id"),
        repo=fields.nonempty("repo"),
        base_commit=fields.nonempty("base_commit"),
        problem_statement=fields.text("problem_statement"),
        format=fmt,
        hints_text=fields.text("hints_text", required=False),
        patch=fields.text("patch"),
        test_patch=fields.text("test_patch"),
        fail_to_pass=fields.tests("FAIL_TO_PASS"),
        pass_to_pass=fields.tests("PASS_TO_PASS"),
        version=fields.text("version", required=False),
        environment_setup_commit=fields.text("environment_setup_commit", required=False),
        image=image,
        eval_script=eval_script,
        test_cmd=test_cmd,
        log_parser=log_parser,
        source=fields.where,
        metadata=fields.extra(),
    )


def _command(config: _Fields, key: str) -> str | None:
    """A test command: a string, or a list whose last entry runs the tests (the harness's rule)."""
    value = config.row.get(key)
    if isinstance(value, list | tuple):
        if not value or not all(isinstance(item, str) for item in value):
            raise config.error(key, f"must be a command or a list of commands, got {_shape(value)}", "fix it")
        return value[-1]
    return config.optional(key)


def _swesmith(fields: _Fields, fmt: SweFormat) -> SweInstance:
    """SWE-smith: ``patch`` breaks the repo; the fix is its reverse; the tests are already there."""
    instance_id = fields.nonempty("instance_id")
    bug = fields.nonempty("patch")
    try:
        fix = reverse_patch(bug)
    except ValueError as exc:
        raise fields.error("patch", f"cannot be reversed into the fix ({exc})", "use a text diff") from exc
    return SweInstance(
        instance_id=instance_id,
        repo=fields.nonempty("repo"),
        # SWE-smith keeps each bug on a branch named after the instance.
        base_commit=fields.text("base_commit", required=False) or instance_id,
        problem_statement=fields.text("problem_statement", required=False),
        format=fmt,
        hints_text=fields.text("hints_text", required=False),
        patch=fix,
        bug_patch=bug,
        fail_to_pass=fields.tests("FAIL_TO_PASS"),
        pass_to_pass=fields.tests("PASS_TO_PASS"),
        version=fields.text("version", required=False),
        image=fields.nonempty("image_name"),
        source=fields.where,
        metadata=fields.extra(),
    )


def _r2egym(fields: _Fields, fmt: SweFormat) -> SweInstance:
    """R2E-Gym: graded by comparing every test's status with ``expected_output_json``."""
    repo_name = fields.nonempty("repo_name")
    commit = fields.text("commit_hash", required=False)
    instance_id = fields.text("instance_id", required=False) or (
        f"{repo_name}-{commit[:12]}" if commit else ""
    )
    if not instance_id:
        raise fields.error("commit_hash", "is missing", "add it (it names the instance)")
    fields = _Fields(fields.row, f"{fields.where} ({instance_id})")
    expected = fields.mapping("expected_output_json")
    if not all(isinstance(value, str) for value in expected.values()):
        raise fields.error("expected_output_json", "must map test ids to statuses (strings)", "fix it")
    commit = fields.mapping("parsed_commit_content")
    base = str(commit.get("old_commit_hash") or "")
    if not base:
        raise fields.error("parsed_commit_content", "has no old_commit_hash", "add the buggy commit's hash")
    try:
        tests = r2e.hidden_tests(fields.mapping("execution_result_content"))
    except ValueError as exc:
        raise fields.error("execution_result_content", str(exc), "it must carry the generated tests") from exc
    return SweInstance(
        instance_id=instance_id,
        repo=repo_name,
        base_commit=base,
        problem_statement=fields.nonempty("problem_statement"),
        format=fmt,
        patch=r2e.gold_patch(commit),
        image=fields.nonempty("docker_image"),
        test_cmd=_R2E_TEST_CMD,
        expected_output=expected,
        hidden_tests=tests,
        source=fields.where,
        metadata=fields.extra(),
    )
