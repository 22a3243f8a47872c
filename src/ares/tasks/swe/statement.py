"""Clean an issue text of pointers to its own fix before an agent reads it.

Issue texts in SWE datasets are scraped from GitHub and sometimes link the pull request or commit
that fixed them (edited in after the fact, or a maintainer's "fixed in #1234"). An agent with network
access, or one that memorised the link target, would be handed the answer. The cleaner replaces:

- URLs of the instance's repository that lead to code changes: pull requests, commits, compares,
  ``.diff``/``.patch`` views and their ``api.github.com`` and ``patch-diff.githubusercontent.com``
  forms (links to other repositories and to issues are kept: they are context, not the fix);
- when the fix's PR number is known (SWE-bench ids end in it: ``astropy__astropy-12907``): the issue
  URL of that number too (GitHub redirects it to the PR), and ``#12907``, ``owner/repo#12907``,
  ``GH-12907`` references;
- when the fix commit is known: its hash (7+ leading hex digits) written anywhere.

Everything else is left byte for byte, so the text still reads as the issue.
"""

from __future__ import annotations

import re

from ares.tasks.swe.instance import SweInstance

MARKER = "[link to the fix removed]"
#: Formats whose instance ids end in the number of the pull request that fixed the issue.
_PR_NUMBERED = frozenset({"swebench", "swebench5", "swegym", "swerebench"})
_URL_TAIL = r"[^\s<>()\[\]{}\"'`]*"


def fix_pr_number(instance: SweInstance) -> int | None:
    """The fix's pull-request number when the instance id carries it (SWE-bench's ``-<number>``)."""
    if instance.format not in _PR_NUMBERED:
        return None
    match = re.search(r"-(\d+)$", instance.instance_id)
    return int(match.group(1)) if match else None


def clean_statement(instance: SweInstance, *, marker: str = MARKER) -> str:
    """``instance.problem_statement`` without links to its fix (see the module docstring)."""
    return clean_problem_statement(
        instance.problem_statement,
        repo=instance.repo,
        pr_number=fix_pr_number(instance),
        fix_commit=instance.metadata.get("fix_commit") or None,
        marker=marker,
    )


def clean_problem_statement(
    text: str,
    *,
    repo: str,
    pr_number: int | None = None,
    fix_commit: str | None = None,
    marker: str = MARKER,
) -> str:
    """``text`` with the links and references to ``repo``'s fix replaced by ``marker``."""
    owner_repo = re.escape(repo.strip("/"))
    change = r"(?:pull|pulls|commit|commits|compare)/" + _URL_TAIL
    urls = [
        rf"https?://(?:www\.)?github\.com/{owner_repo}/{change}",
        rf"https?://api\.github\.com/repos/{owner_repo}/{change}",
        rf"https?://patch-diff\.githubusercontent\.com/raw/{owner_repo}/pull/{_URL_TAIL}",
    ]
    if pr_number is not None:
        urls.append(rf"https?://(?:www\.)?github\.com/{owner_repo}/issues/{pr_number}(?!\d){_URL_TAIL}")
    pattern = re.compile("|".join(f"(?:{url})" for url in urls), re.IGNORECASE)
    text = pattern.sub(lambda match: marker + _trailing_punctuation(match.group(0)), text)
    if pr_number is not None:
        refs = rf"(?<![\w/#-])(?:{owner_repo}#|#|GH-){pr_number}(?!\d)"
        text = re.sub(refs, marker, text, flags=re.IGNORECASE)
    if fix_commit and len(fix_commit) >= 7:
        sha = rf"(?<![0-9a-f]){re.escape(fix_commit[:7].lower())}[0-9a-f]{{0,33}}(?![0-9a-f])"
        text = re.sub(
            sha,
            lambda m: marker if fix_commit.lower().startswith(m.group(0).lower()) else m.group(0),
            text,
            flags=re.IGNORECASE,
        )
    return text


def _trailing_punctuation(url: str) -> str:
    """Sentence punctuation a URL pattern swallowed ("see .../pull/5."): given back to the text."""
    stripped = url.rstrip(".,;:!?")
    return url[len(stripped) :]
