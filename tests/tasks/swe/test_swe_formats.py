"""Each dataset shape parses into the one SweInstance; bad rows name their row and field."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import swe_rows

from ares.errors import TaskError
from ares.tasks.swe.formats import detect_format, parse_row
from ares.tasks.swe.patches import reverse_patch


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (swe_rows.swebench, "swebench"),
        (swe_rows.swebench5, "swebench5"),
        (swe_rows.swegym, "swegym"),
        (swe_rows.swesmith, "swesmith"),
        (swe_rows.swerebench, "swerebench"),
        (swe_rows.r2egym, "r2egym"),
    ],
)
def test_detects_every_format(make, expected):
    assert detect_format(make()) == expected
    assert parse_row(make(), where="rows.jsonl line 1").format == expected


def test_swebench_row_maps_every_field():
    inst = parse_row(swe_rows.swebench(), where="f.jsonl line 1")
    assert inst.instance_id == "astropy__astropy-12907"
    assert inst.repo == "astropy/astropy"
    assert inst.fail_to_pass == tuple(swe_rows.F2P)
    assert inst.pass_to_pass == tuple(swe_rows.P2P)
    assert inst.patch == swe_rows.FIX and inst.test_patch == swe_rows.TEST_PATCH
    assert inst.version == "4.3"
    assert inst.environment_setup_commit.startswith("298ccb")
    assert inst.image is None and inst.eval_script is None and inst.bug_patch is None
    assert inst.metadata == {"created_at": "2022-03-03T15:14:54Z"}
    assert inst.source == "f.jsonl line 1 (astropy__astropy-12907)"


def test_swebench5_keeps_image_script_and_parser():
    inst = parse_row(swe_rows.swebench5(), where="x")
    assert inst.image == "registry.example.org/swe/astropy-12907:v5"
    assert inst.eval_script is not None and "pytest -rA" in inst.eval_script
    assert inst.log_parser == "pytest"


def test_swegym_lists_and_forced_format():
    inst = parse_row(swe_rows.swegym(), where="x")
    assert inst.fail_to_pass == ("tests/test_ssm/test_ssm_boto3.py::test_describe_parameters__multiple_tags",)
    assert parse_row(swe_rows.swegym(), where="x", format="swebench").format == "swebench"


def test_swerebench_install_config():
    inst = parse_row(swe_rows.swerebench(), where="x")
    assert inst.image == "swerebench/sweb.eval.x86_64.oemof_1776_tespy-653"
    assert inst.test_cmd is not None and inst.test_cmd.startswith("pytest --no-header -rA")
    assert inst.log_parser == "parse_log_pytest"
    assert inst.metadata["install_config"]["python"] == "3.11"
    row = swe_rows.swerebench()
    row["install_config"] = '{"test_cmd": ["source /opt/env", "tox -e py"], "log_parser": "parse_log_tox"}'
    inst = parse_row(row, where="x")
    assert (inst.test_cmd, inst.log_parser) == ("tox -e py", "parse_log_tox")


def test_r2egym_expected_output():
    inst = parse_row(swe_rows.r2egym(), where="r2e.jsonl line 4")
    assert inst.instance_id == "aiohttp-f0d74880deec"
    assert inst.base_commit == "5b6d5a8b3e2f0c1d9e8f7a6b5c4d3e2f1a0b9c8d"
    assert inst.expected_output == {
        "test_1::TestCompression::test_force": "PASSED",
        "test_1::test_plain": "PASSED",
    }
    assert inst.image and inst.image.startswith("namanjain12/aiohttp_final:")
    assert inst.fail_to_pass == () and inst.has_gold_patch
    assert inst.patch.startswith("diff --git a/aiohttp/web_response.py b/aiohttp/web_response.py\n")
    assert "-    return None\n+    return force\n" in inst.patch
    assert inst.hidden_tests == {"test_1.py": "def test_plain():\n    pass\n"}
    assert inst.metadata["modified_files"] == ["aiohttp/web_response.py"]
    assert "execution_result_content" not in inst.metadata  # the hidden tests stay out of the metadata


def test_swesmith_bug_and_fix(tmp_path: Path):
    row = swe_rows.swesmith()
    inst = parse_row(row, where="x")
    assert inst.bug_patch == row["patch"]
    assert inst.image == "swesmith.x86_64.oauthlib__oauthlib.1fd52536"
    assert "-    return s.upper()\n+    return s\n" in inst.patch
    # The fix really undoes the bug: apply the bug, then the fix, with git.
    original = "".join(f"line {n}\n" for n in range(1, 10)) + "    s = _quote(s, safe)\n    return s\n\n"
    (tmp_path / "oauthlib").mkdir()
    (tmp_path / "oauthlib" / "common.py").write_text(original)
    for name, diff in (("bug", inst.bug_patch), ("fix", inst.patch)):
        (tmp_path / f"{name}.diff").write_text(diff or "")
        subprocess.run(["git", "apply", f"{name}.diff"], cwd=tmp_path, check=True, capture_output=True)
        if name == "bug":
            assert "s.upper()" in (tmp_path / "oauthlib" / "common.py").read_text()
    assert (tmp_path / "oauthlib" / "common.py").read_text() == original


def test_reverse_patch_new_file_and_double_reverse():
    diff = (
        "diff --git a/src/new.py b/src/new.py\nnew file mode 100644\nindex 0000000..e69de29\n"
        "--- /dev/null\n+++ b/src/new.py\n@@ -0,0 +1,2 @@\n+--- not a header\n++++ nor this\n"
    )
    back = reverse_patch(diff)
    assert "deleted file mode 100644" in back
    assert "--- a/src/new.py\n+++ /dev/null\n@@ -1,2 +0,0 @@\n---- not a header\n-+++ nor this\n" in back
    assert reverse_patch(back) == diff


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [
        (lambda r: r.pop("base_commit"), "base_commit", "is missing"),
        (lambda r: r.update(FAIL_TO_PASS='"tests/test_x.py::test_a"'), "FAIL_TO_PASS", "must be a list"),
        (lambda r: r.update(FAIL_TO_PASS="[not json"), "FAIL_TO_PASS", "not a JSON list"),
        (lambda r: r.update(PASS_TO_PASS=[1, 2]), "PASS_TO_PASS", "must be a list of test ids"),
        (lambda r: r.update(patch=["a"]), "patch", "must be a string"),
        (lambda r: r.update(instance_id=""), "instance_id", "is empty"),
    ],
)
def test_malformed_rows_name_row_and_field(mutate, field, words):
    row = swe_rows.swebench()
    mutate(row)
    with pytest.raises(TaskError) as caught:
        parse_row(row, where="data/sb.jsonl line 7")
    message = str(caught.value)
    assert "data/sb.jsonl line 7" in message and repr(field) in message and words in message


def test_unknown_shape_and_non_object():
    known = r"f.json row 2: not a known SWE dataset row \(keys: answer, question\)"
    with pytest.raises(TaskError, match=known):
        parse_row({"question": "q", "answer": "a"}, where="f.json row 2")
    with pytest.raises(TaskError, match="must be a JSON object, got list"):
        parse_row(["a"], where="f.json row 3")
    with pytest.raises(TaskError, match="unknown SWE format 'nope'"):
        parse_row(swe_rows.swebench(), where="x", format="nope")  # type: ignore[arg-type]


def test_malformed_format_specific_fields():
    row = swe_rows.r2egym()
    row["expected_output_json"] = "[1, 2]"
    where = r"r\.jsonl line 1 \(aiohttp-f0d74880deec\): field 'expected_output_json'"
    with pytest.raises(TaskError, match=where):
        parse_row(row, where="r.jsonl line 1")
    row = swe_rows.swerebench()
    row["install_config"] = "{oops"
    with pytest.raises(TaskError, match=r"oemof__tespy-653\): field 'install_config' is not valid JSON"):
        parse_row(row, where="x")
    row = swe_rows.swesmith()
    del row["image_name"]  # reads as SWE-Gym then, whose parser names what is missing
    with pytest.raises(TaskError, match=r"field 'test_patch' is missing"):
        parse_row(row, where="x")
