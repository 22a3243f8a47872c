"""The image an instance runs in.

An instance's own image field wins (SWE-bench 5.x ``image``, SWE-rebench ``docker_image``, SWE-smith
``image_name``, R2E-Gym ``docker_image``); otherwise a template names it. The default template is the
official SWE-bench one: the harness lowercases the instance id and, for images on a registry,
replaces ``__`` with ``_1776_`` (Docker Hub forbids ``__``), e.g. ``astropy__astropy-12907`` ->
``swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest``. A template may use ``{instance_id}``
(verbatim) and ``{name}`` (the id as that official naming writes it), so a mirror of the official
images is one option: ``myregistry:5000/sweb.eval.x86_64.{name}:latest``.
"""

from __future__ import annotations

import string

from ares.errors import TaskError
from ares.images.errors import ImageError
from ares.images.registry.reference import parse_reference
from ares.tasks.swe.instance import SweInstance

DEFAULT_IMAGE_TEMPLATE = "swebench/sweb.eval.x86_64.{name}:latest"
#: SWE-Gym's images (built for OpenHands) use ``_s_`` for ``__`` under their own namespace.
SWEGYM_IMAGE_PREFIX = "xingyaoww/sweb.eval.x86_64."
#: SWE-smith's ``image_name`` values are bare names published under this Docker Hub namespace.
SWESMITH_NAMESPACE = "jyangballin"
PLACEHOLDERS = ("instance_id", "name")


def official_name(instance_id: str) -> str:
    """The instance id as the SWE-bench harness writes it in a registry image name."""
    return instance_id.lower().replace("__", "_1776_")


def check_template(template: str) -> str:
    """Return ``template`` if its placeholders are only ``{instance_id}`` and ``{name}``."""
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise TaskError(
            f"image template {template!r} is malformed ({exc}); write placeholders as {{instance_id}} "
            "or {name}, and a literal brace as {{ or }}"
        ) from exc
    for _, field, spec, conversion in parts:
        if field is None:
            continue
        if field not in PLACEHOLDERS or spec or conversion:
            raise TaskError(
                f"image template {template!r} uses {{{field}{'!' + conversion if conversion else ''}"
                f"{':' + spec if spec else ''}}}; the placeholders are {{instance_id}} and {{name}}, "
                "e.g. 'myregistry:5000/sweb.eval.x86_64.{name}:latest'"
            )
    return template


def render_template(template: str, instance_id: str) -> str:
    """The image name ``template`` gives ``instance_id``, checked as an image reference."""
    image = check_template(template).format(instance_id=instance_id, name=official_name(instance_id))
    return _checked(image, f"image template {template!r}: the image for {instance_id!r},")


def image_for(instance: SweInstance, template: str | None = None, *, override: bool = False) -> str:
    """The image to run ``instance`` in.

    The instance's own image comes first; ``template`` (default: the official SWE-bench naming, or
    SWE-Gym's for SWE-Gym rows) names the rest. ``override=True`` applies ``template`` even to
    instances that name their image, e.g. to pull every image from a private mirror.
    """
    if template is not None and (override or not instance.image):
        return render_template(template, instance.instance_id)
    if instance.image:
        return _own_image(instance)
    if instance.format == "swegym":
        gym = instance.instance_id.replace("__", "_s_").lower()
        return _checked(f"{SWEGYM_IMAGE_PREFIX}{gym}:latest", f"{instance.source}: the SWE-Gym image")
    return render_template(DEFAULT_IMAGE_TEMPLATE, instance.instance_id)


def _own_image(instance: SweInstance) -> str:
    image = str(instance.image)
    if instance.format == "swesmith" and "/" not in image:
        # A bare SWE-smith name: published on Docker Hub with `__` spelled `_1776_`.
        image = f"{SWESMITH_NAMESPACE}/{image.replace('__', '_1776_')}"
    return _checked(image, f"{instance.source}: the image")


def _checked(image: str, what: str) -> str:
    try:
        parse_reference(image)
    except ImageError as exc:
        raise TaskError(f"{what} {image!r} is not a valid image reference ({exc}); fix the name") from exc
    return image
