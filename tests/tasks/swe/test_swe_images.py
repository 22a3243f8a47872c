"""Image names: a row's own image, the official SWE-bench naming, SWE-Gym's, and user templates."""

from __future__ import annotations

import pytest
import swe_rows

from ares.errors import TaskError
from ares.tasks.swe.formats import parse_row
from ares.tasks.swe.images import check_template, image_for, official_name


def _inst(make, **changes):
    return parse_row({**make(), **changes}, where="x")


def test_official_naming_lowercases_and_spells_double_underscore():
    assert official_name("astropy__astropy-12907") == "astropy_1776_astropy-12907"
    assert official_name("Project-MONAI__MONAI-5686") == "project-monai_1776_monai-5686"
    assert (
        image_for(_inst(swe_rows.swebench)) == "swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest"
    )


def test_templates():
    inst = _inst(swe_rows.swebench, instance_id="sphinx-doc__sphinx-8721")
    mirror = "myregistry:5000/sweb.eval.x86_64.{name}:latest"
    assert image_for(inst, mirror) == "myregistry:5000/sweb.eval.x86_64.sphinx-doc_1776_sphinx-8721:latest"
    assert image_for(inst, "localhost/swe:{instance_id}") == "localhost/swe:sphinx-doc__sphinx-8721"


def test_own_image_wins_unless_overridden():
    five = _inst(swe_rows.swebench5)
    assert image_for(five, "mirror.local/{name}") == "registry.example.org/swe/astropy-12907:v5"
    assert image_for(five, "mirror.local/{name}", override=True) == "mirror.local/astropy_1776_astropy-12907"
    assert image_for(_inst(swe_rows.swerebench)) == "swerebench/sweb.eval.x86_64.oemof_1776_tespy-653"
    assert image_for(_inst(swe_rows.r2egym)).startswith("namanjain12/aiohttp_final:f0d74880")


def test_dataset_specific_defaults():
    assert image_for(_inst(swe_rows.swegym)) == "xingyaoww/sweb.eval.x86_64.getmoto_s_moto-5752:latest"
    smith = _inst(swe_rows.swesmith)
    assert image_for(smith) == "jyangballin/swesmith.x86_64.oauthlib_1776_oauthlib.1fd52536"
    namespaced = _inst(
        swe_rows.swesmith, image_name="swebench/swesmith.x86_64.oauthlib_1776_oauthlib.1fd52536"
    )
    assert image_for(namespaced) == "swebench/swesmith.x86_64.oauthlib_1776_oauthlib.1fd52536"


@pytest.mark.parametrize(
    ("template", "words"),
    [
        ("registry/{id}:latest", "uses {id}"),
        ("registry/{name!r}", "uses {name!r}"),
        ("registry/{name:>10}", "uses {name:>10}"),
        ("registry/{name", "malformed"),
        ("registry/}{name}", "malformed"),
    ],
)
def test_bad_placeholders_are_clear_errors(template, words):
    with pytest.raises(TaskError, match=r"placeholders|malformed") as caught:
        check_template(template)
    assert words in str(caught.value)


def test_template_giving_an_invalid_reference():
    with pytest.raises(TaskError, match="not a valid image reference"):
        image_for(_inst(swe_rows.swebench), "Registry With Spaces/{instance_id}")
