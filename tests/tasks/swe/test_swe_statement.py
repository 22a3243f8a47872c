"""Issue texts lose links to their own fix and keep everything else."""

from __future__ import annotations

import re

import swe_rows

from ares.tasks.swe.formats import parse_row
from ares.tasks.swe.statement import MARKER, clean_problem_statement, clean_statement, fix_pr_number

ISSUE = """\
Consider the following model:

```python
from astropy.modeling import models as m
cm = m.Linear1D(10) & m.Linear1D(5)
```

This was introduced in https://github.com/astropy/astropy/pull/11853 and is related to #12300.
It is fixed by https://github.com/astropy/astropy/pull/12907/files#diff-1a2b, see also
https://github.com/astropy/astropy/commit/d16bfe05a744909de4b27f5875fe0d4ed41ce607.
Compare: https://github.com/Astropy/Astropy/compare/v4.3...main?expand=1
Raw: https://patch-diff.githubusercontent.com/raw/astropy/astropy/pull/12907.diff
API: https://api.github.com/repos/astropy/astropy/pulls/12907
The issue itself: https://github.com/astropy/astropy/issues/12906 and numpy's
https://github.com/numpy/numpy/pull/20000 stay. Fixed in #12907 (astropy/astropy#12907, GH-12907).
Not #129070, nor https://github.com/astropy/astropy/issues/129071.
"""


def test_cleans_links_of_the_instance_repo():
    inst = parse_row({**swe_rows.swebench(), "problem_statement": ISSUE}, where="x")
    assert fix_pr_number(inst) == 12907
    cleaned = clean_statement(inst)
    for gone in (
        "pull/11853",
        "pull/12907",
        "/commit/",
        "/compare/",
        "patch-diff",
        "api.github.com",
        "#12907",
        "GH-12907",
    ):
        assert not re.search(re.escape(gone) + r"(?!\d)", cleaned), gone
    for kept in (
        "cm = m.Linear1D(10) & m.Linear1D(5)",
        "related to #12300.",
        "issues/12906",
        "numpy/numpy/pull/20000",
        "Not #129070",
        "issues/129071",
    ):
        assert kept in cleaned, kept
    assert f"This was introduced in {MARKER} and" in cleaned
    assert f"see also\n{MARKER}.\n" in cleaned
    assert f"Fixed in {MARKER} ({MARKER}, {MARKER})." in cleaned


def test_pr_issue_url_and_fix_commit():
    text = "Regression from deadbeefcafe1234 (see https://github.com/psf/requests/issues/863)."
    cleaned = clean_problem_statement(
        text, repo="psf/requests", pr_number=863, fix_commit="deadbeefcafe1234567890abcdef123456789012"
    )
    assert cleaned == f"Regression from {MARKER} (see {MARKER})."
    assert clean_problem_statement(text, repo="psf/requests") == text


def test_no_pr_number_for_synthetic_datasets():
    inst = parse_row(swe_rows.swesmith(), where="x")
    assert fix_pr_number(inst) is None
    assert clean_statement(inst) == inst.problem_statement
