"""Hand-written rows in each dataset's shape (field names and value shapes of the public datasets)."""

from __future__ import annotations

import json
from typing import Any

FIX = """diff --git a/astropy/modeling/separable.py b/astropy/modeling/separable.py
--- a/astropy/modeling/separable.py
+++ b/astropy/modeling/separable.py
@@ -242,7 +242,7 @@ def _cstack(left, right):
         cright = _coord_matrix(right, 'right', noutp)
     else:
         cright = np.zeros((noutp, right.shape[1]))
-        cright[-right.shape[0]:, -right.shape[1]:] = 1
+        cright[-right.shape[0]:, -right.shape[1]:] = right
\x20
     return np.hstack([cleft, cright])
"""

TEST_PATCH = """\
diff --git a/astropy/modeling/tests/test_separable.py b/astropy/modeling/tests/test_separable.py
--- a/astropy/modeling/tests/test_separable.py
+++ b/astropy/modeling/tests/test_separable.py
@@ -28,6 +28,13 @@
 p1 = models.Polynomial1D(1, name='p1')
+cm_4d_expected = (np.array([False, False, True, True]),)
"""

F2P = ["astropy/modeling/tests/test_separable.py::test_separable[compound_model6-result6]"]
P2P = [
    "astropy/modeling/tests/test_separable.py::test_coord_matrix",
    "astropy/modeling/tests/test_separable.py::test_cdot",
]


def swebench() -> dict[str, Any]:
    return {
        "repo": "astropy/astropy",
        "instance_id": "astropy__astropy-12907",
        "base_commit": "d16bfe05a744909de4b27f5875fe0d4ed41ce607",
        "patch": FIX,
        "test_patch": TEST_PATCH,
        "problem_statement": "Modeling's `separability_matrix` does not compute separability correctly "
        "for nested CompoundModels\n",
        "hints_text": "",
        "created_at": "2022-03-03T15:14:54Z",
        "version": "4.3",
        "FAIL_TO_PASS": json.dumps(F2P),
        "PASS_TO_PASS": json.dumps(P2P),
        "environment_setup_commit": "298ccb478e6bf092953bca67a3d29dc6c35f6752",
    }


def swebench5() -> dict[str, Any]:
    row = swebench()
    row["image"] = "registry.example.org/swe/astropy-12907:v5"
    row["eval_script"] = "#!/bin/bash\nset -uxo pipefail\ncd /testbed\npytest -rA astropy/modeling\n"
    row["log_parser"] = "pytest"
    return row


def swegym() -> dict[str, Any]:
    return {
        "instance_id": "getmoto__moto-5752",
        "hints_text": "",
        "patch": "diff --git a/moto/ssm/models.py b/moto/ssm/models.py\n--- a/moto/ssm/models.py\n"
        "+++ b/moto/ssm/models.py\n@@ -1,1 +1,1 @@\n-x = 1\n+x = 2\n",
        "test_patch": "diff --git a/tests/test_ssm.py b/tests/test_ssm.py\n",
        "created_at": "2022-12-10 20:23:01",
        "problem_statement": "describe_parameters depends on filter order, but shouldn't\n",
        "repo": "getmoto/moto",
        "base_commit": "b2300f1eae1323e3e8bc45f97e530ce129dff12e",
        "version": "4.0",
        "PASS_TO_PASS": ["tests/test_ssm/test_ssm_boto3.py::test_get_parameter"],
        "FAIL_TO_PASS": ["tests/test_ssm/test_ssm_boto3.py::test_describe_parameters__multiple_tags"],
    }


def swesmith() -> dict[str, Any]:
    bug = (
        "diff --git a/oauthlib/common.py b/oauthlib/common.py\n"
        "index 1111111..2222222 100644\n"
        "--- a/oauthlib/common.py\n+++ b/oauthlib/common.py\n"
        "@@ -10,3 +10,3 @@ def quote(s, safe=b'/'):\n"
        "     s = _quote(s, safe)\n-    return s\n+    return s.upper()\n \n"
    )
    return {
        "instance_id": "oauthlib__oauthlib.1fd52536.combine_file__09vlzwgc",
        "repo": "swesmith/oauthlib__oauthlib.1fd52536",
        "patch": bug,
        "FAIL_TO_PASS": ["tests/test_common.py::EncodingTest::test_urldecode"],
        "PASS_TO_PASS": ["tests/test_common.py::ParameterTest::test_add_params_to_uri"],
        "created_at": "2025-03-14T20:23:59.569834",
        "image_name": "swesmith.x86_64.oauthlib__oauthlib.1fd52536",
        "base_commit": "1fd5253630c03e3f12719dd8c13d43111f66a8d2",
        "problem_statement": "URL decoding returns upper-cased text\n",
    }


def swerebench() -> dict[str, Any]:
    return {
        "instance_id": "oemof__tespy-653",
        "base_commit": "dd5277a75e98c2c0b6f3f9ed9b2a5d8e5f1e7c41",
        "created_at": "2025-01-15T09:12:00",
        "environment_setup_commit": "dd5277a75e98c2c0b6f3f9ed9b2a5d8e5f1e7c41",
        "hints_text": "",
        "patch": FIX,
        "problem_statement": "Heat exchanger kA fails for zero flow\n",
        "repo": "oemof/tespy",
        "test_patch": TEST_PATCH,
        "meta": {"has_test_patch": True, "is_lite": False},
        "version": "0.7",
        "install_config": {
            "install": "pip install -e .[dev]",
            "log_parser": "parse_log_pytest",
            "python": "3.11",
            "test_cmd": "pytest --no-header -rA --tb=line --color=no -p no:cacheprovider -W ignore",
        },
        "requirements": "numpy==2.1.0\n",
        "environment": "name: testbed\n",
        "FAIL_TO_PASS": ["tests/test_components.py::test_kA_zero_flow"],
        "PASS_TO_PASS": ["tests/test_components.py::test_pump"],
        "license_name": "MIT License",
        "docker_image": "swerebench/sweb.eval.x86_64.oemof_1776_tespy-653",
    }


def r2egym() -> dict[str, Any]:
    fix = {
        "header": {"file": {"path": "aiohttp/web_response.py"}},
        "old_file_content": "def enable_compression(force=None):\n    return None\n",
        "new_file_content": "def enable_compression(force=None):\n    return force\n",
    }
    commit = {"old_commit_hash": "5b6d5a8b3e2f0c1d9e8f7a6b5c4d3e2f1a0b9c8d", "file_diffs": [fix]}
    tests = {"test_file_names": ["test_1.py"], "test_file_codes": ["def test_plain():\n    pass\n"]}
    return {
        "repo_name": "aiohttp",
        "docker_image": "namanjain12/aiohttp_final:f0d74880deec8fcd982bce639c93c5e130d41198",
        "commit_hash": "f0d74880deec8fcd982bce639c93c5e130d41198",
        "parsed_commit_content": json.dumps(commit),
        "execution_result_content": json.dumps(tests),
        "modified_files": ["aiohttp/web_response.py"],
        "relevant_files": [],
        "num_non_test_files": 1,
        "num_non_test_func_methods": 1,
        "num_non_test_lines": 4,
        "prompt": "",
        "problem_statement": "[ISSUE]\nStreamResponse.enable_compression ignores force\n[/ISSUE]",
        "expected_output_json": json.dumps(
            {"test_1::TestCompression::test_force": "PASSED", "test_1::test_plain": "PASSED"}
        ),
    }
