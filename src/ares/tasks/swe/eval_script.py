"""The scripts the SWE verifier runs in a fresh sandbox of the pristine image.

Two scripts, both plain bash run by the trusted shell (never by anything the agent left behind):

* :func:`apply_cascade_script` applies the agent's diff the way the harness tries it: ``git apply``, then
  ``--3way``, then ``--reject``, then ``patch --fuzz=5``, resetting the tree between attempts; a patch
  that turns out to be applied already is accepted. Nothing applying exits with
  :data:`APPLY_FAILED_EXIT_CODE` so the verifier can tell "the diff is unusable" from a crash.
* :func:`make_eval_script` resets the files the ``test_patch`` touches to ``base_commit`` (so the agent
  cannot pre-edit the hidden tests), applies the ``test_patch``, runs the test command between the
  harness's markers, records the command's own exit status after the end marker, and resets again.
  Its log is what :func:`ares.tasks.swe.grading.grade_log` (and the official ``get_eval_report``) read.

Markers are ``echo``-ed, not traced with ``set -x``: a traced marker would appear twice in the log and the
harness slices the log at the first two occurrences.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ares.tasks.swe import markers

# The official images' environment (SWE-bench's Dockerfiles install a conda env named "testbed").
OFFICIAL_ENV_SETUP: tuple[str, ...] = ("source /opt/miniconda3/bin/activate", "conda activate testbed")
DEFAULT_WORKDIR = "/testbed"
APPLY_FAILED_EXIT_CODE = 86
# Same order as the harness's run_instance; each attempt starts from a clean tree.
APPLY_COMMANDS: tuple[str, ...] = (
    "git apply --verbose",
    "git apply --verbose --3way",
    "git apply --verbose --reject",
    "patch --batch --forward --fuzz=5 -p1 -i",
)
# Files the harness never passes to the test command (data and docs touched by a test_patch).
NON_TEST_EXTS: tuple[str, ...] = (".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml")
NON_TEST_EXTS += (".yaml", ".toml")

_GIT_QUOTED = re.compile(r'^"(.*)"$')


@dataclass(frozen=True)
class PatchFile:
    """One file a diff touches: its path and whether the diff creates or deletes it."""

    path: str
    added: bool = False
    deleted: bool = False


def _header_path(raw: str) -> str | None:
    """The path of a ``---``/``+++`` header, without its a/ b/ prefix, or None for /dev/null."""
    raw = raw.split("\t", 1)[0].rstrip("\r")
    quoted = _GIT_QUOTED.match(raw)
    if quoted:  # git C-quotes paths with unusual characters
        raw = quoted.group(1).encode("latin-1", "backslashreplace").decode("unicode_escape")
        raw = raw.encode("latin-1").decode("utf-8", "replace")
    if raw == "/dev/null":
        return None
    return raw[2:] if raw[:2] in ("a/", "b/") else raw


def patch_files(patch: str) -> list[PatchFile]:
    """Files a unified/git diff touches, in order, read from its ``---``/``+++`` headers."""
    files: list[PatchFile] = []
    lines = patch.splitlines()
    for i, line in enumerate(lines[:-1]):
        nxt = lines[i + 1]
        if not (line.startswith("--- ") and nxt.startswith("+++ ")):
            continue
        old, new = _header_path(line[4:]), _header_path(nxt[4:])
        if new is not None:
            files.append(PatchFile(new, added=old is None))
        elif old is not None:
            files.append(PatchFile(old, deleted=True))
    # git-only changes (pure renames, mode changes, binary files) have no ---/+++ pair
    seen = {f.path for f in files}
    for m in re.finditer(r"^diff --git a/(\S+) b/(\S+)$", patch, flags=re.M):
        if m.group(2) not in seen:
            seen.add(m.group(2))
            files.append(PatchFile(m.group(2)))
    return files


def runner_args(files: Iterable[str], style: str = "pytest") -> list[str]:
    """What to pass the test command: test files (pytest) or dotted labels (Django's runtests.py)."""
    out = [f for f in files if not f.endswith(NON_TEST_EXTS)]
    if style == "django":
        out = [f.removeprefix("tests/").removesuffix(".py").replace("/", ".") for f in out]
    return out


def _heredoc(text: str) -> tuple[str, str]:
    """A quoted heredoc delimiter the text does not contain (the text is data, never shell), derived
    from the text so that the same instance always gets the same script."""
    body = text if text.endswith("\n") else text + "\n"
    for salt in itertools.count():
        tag = f"ARES_EOF_{hashlib.sha256(f'{salt}:{body}'.encode()).hexdigest()[:16]}"
        if tag not in body:
            return tag, body
    raise AssertionError("unreachable")


def _reset_lines(base_commit: str, files: Sequence[PatchFile]) -> list[str]:
    """Put the test_patch's files back to base_commit: check out existing ones, remove created ones."""
    lines = []
    existing = [f.path for f in files if not f.added]
    created = [f.path for f in files if f.added]
    if existing:
        paths = " ".join(shlex.quote(p) for p in existing)
        lines.append(f"git checkout {shlex.quote(base_commit)} -- {paths} || echo '{markers.RESET_FAILED}'")
    if created:
        lines.append("rm -rf -- " + " ".join(shlex.quote(p) for p in created))
    return lines


def make_eval_script(
    base_commit: str,
    test_patch: str,
    test_cmd: str = "pytest -rA",
    test_files: Sequence[str] | None = None,
    env_setup: Sequence[str] = (),
    workdir: str = DEFAULT_WORKDIR,
    directive_style: str = "pytest",
) -> str:
    """The eval script: reset test files, apply test_patch, run tests between markers, reset again.

    ``test_files`` default to the test_patch's files (data files dropped, as the harness does);
    ``env_setup`` lines run first (``OFFICIAL_ENV_SETUP`` for the official images).
    """
    touched = patch_files(test_patch)
    if test_files is None:
        test_files = runner_args([f.path for f in touched if not f.deleted], directive_style)
    tag, body = _heredoc(test_patch)
    run = " ".join([test_cmd, *(shlex.quote(f) for f in test_files)])
    lines = [
        "#!/bin/bash",
        "set -uo pipefail",
        *env_setup,
        f"cd {shlex.quote(workdir)} || {{ echo '{markers.RESET_FAILED}'; exit 1; }}",
        *_reset_lines(base_commit, touched),
    ]
    if test_patch.strip():
        lines += [
            f"git apply --verbose - <<'{tag}' || {{ echo '{markers.APPLY_PATCH_FAIL}'; exit 1; }}",
            body.rstrip("\n"),
            tag,
        ]
    lines += [
        f"echo '{markers.START_TEST_OUTPUT}'",
        run,
        "ARES_TEST_EXIT_CODE=$?",
        f"echo '{markers.END_TEST_OUTPUT}'",
        f'echo "{markers.TEST_EXIT_CODE}: $ARES_TEST_EXIT_CODE"',
        *_reset_lines(base_commit, touched),
        "",
    ]
    return "\n".join(lines)


def apply_cascade_script(patch_path: str, workdir: str = DEFAULT_WORKDIR) -> str:
    """Bash that applies the patch at ``patch_path`` like the harness; exit 0, or APPLY_FAILED_EXIT_CODE.

    An empty patch applies trivially (exit 0, tree unchanged): "the agent changed nothing" must grade as
    a 0 on the tests, not as an errored episode.
    """
    p = shlex.quote(patch_path)
    lines = [
        "#!/bin/bash",
        "set -u",
        f"cd {shlex.quote(workdir)} || exit {APPLY_FAILED_EXIT_CODE}",
        f"if [ ! -s {p} ]; then echo '{markers.APPLY_PATCH_PASS}: empty patch'; exit 0; fi",
        "first=1",
        "for cmd in " + " ".join(shlex.quote(c) for c in APPLY_COMMANDS) + "; do",
        '  if [ "$first" = 0 ]; then git checkout -- . ; git clean -fdq; fi',
        "  first=0",
        f'  if $cmd {p}; then echo "{markers.APPLY_PATCH_PASS}: $cmd"; exit 0; fi',
        "done",
        f"if git apply --check --reverse {p} 2>/dev/null; then",
        f"  echo '{markers.APPLY_PATCH_PASS}: already applied'; exit 0",
        "fi",
        f"echo '{markers.APPLY_PATCH_FAIL}'",
        f"exit {APPLY_FAILED_EXIT_CODE}",
        "",
    ]
    return "\n".join(lines)
