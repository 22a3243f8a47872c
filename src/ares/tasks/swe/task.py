"""A SWE instance as an ARES ``Task``: its image, /testbed, the cleaned issue text, the oracle, grading.

Image, in order: the instance's own image field (``images.image_for``); else, with ``image_template``
given, that template; else a Dockerfile directory ``<images_dir>/instances/<instance_id>/`` when it
exists (``images_dir`` defaults to the ``images`` dir next to the instance file: the fixtures' layout,
and a simple convention for any locally built set); else the official SWE-bench naming.

``images_dir`` is also the set's image dir (``ares.images.build.image_dirs``): an image the instances
name, directly or in a ``FROM``, whose repository ends in ``NAME`` is built from
``<images_dir>/NAME/Dockerfile`` on first use (``ares-swe/toolz:1.2.0`` -> ``images/toolz/``).

What the agent sees: the image (the repository at ``base_commit``), the cleaned problem statement and
nothing else. The ``test_patch`` and the gold ``patch`` live only in the task's ``SweVerification``
and ``solution`` on the host; network is off.

``specs.json`` next to the instance file (``{repo: {version: {test_cmd, log_parser}}}``, the shape of
SWE-bench's per-repo spec table) supplies test commands and log parsers for rows without their own;
the default is ``pytest -rA`` and the pytest parser.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ares.errors import TaskError
from ares.sandbox.base import ImageSpec
from ares.tasks.model import Task
from ares.tasks.swe import changes, r2e
from ares.tasks.swe.changes import WORKDIR
from ares.tasks.swe.eval_script import OFFICIAL_ENV_SETUP, make_eval_script, patch_files
from ares.tasks.swe.hygiene import clean_image
from ares.tasks.swe.images import check_template, image_for
from ares.tasks.swe.instance import SweInstance
from ares.tasks.swe.load import load_swe_instances
from ares.tasks.swe.statement import clean_statement
from ares.tasks.swe.verification import SweVerification
from ares.tasks.verifier import TESTS_DIR

DEFAULT_TEST_CMD = "pytest -rA"
DEFAULT_PARSER = "pytest"
SOLVE_SH = """#!/bin/bash
# The oracle: apply the gold patch to /testbed (the repository at base_commit).
set -euo pipefail
cd /testbed
git apply --verbose /solution/fix.patch || patch --batch --forward -p1 -i /solution/fix.patch
"""
_INSTRUCTION = """{statement}

---
The repository is at /testbed (at the commit the issue was reported against). Change its source code
so that the issue above is resolved. Do not change the tests: hidden tests will check the fix.
"""


@dataclass(frozen=True)
class SweSpec:
    """How a repo/version's tests run: the command and the harness's log parser name."""

    test_cmd: str = DEFAULT_TEST_CMD
    log_parser: str = DEFAULT_PARSER


def load_specs(path: Path) -> dict[tuple[str, str], SweSpec]:
    """A ``specs.json`` (repo -> version -> {test_cmd, log_parser}); {} when the file is absent."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise TaskError(f"{path}: not readable JSON ({exc}); fix or remove it") from exc
    specs: dict[tuple[str, str], SweSpec] = {}
    if not isinstance(data, Mapping):
        raise TaskError(f"{path}: must map repo -> version -> spec")
    for repo, versions in data.items():
        if not isinstance(versions, Mapping):
            raise TaskError(f"{path}: {repo!r} must map versions to specs")
        for version, spec in versions.items():
            if not isinstance(spec, Mapping):
                raise TaskError(f"{path}: {repo!r} {version!r} must be an object")
            specs[(repo, version)] = SweSpec(
                test_cmd=str(spec.get("test_cmd") or DEFAULT_TEST_CMD),
                log_parser=str(spec.get("log_parser") or DEFAULT_PARSER),
            )
    return specs


def swe_task(
    instance: SweInstance,
    *,
    image_template: str | None = None,
    images_dir: Path | None = None,
    spec: SweSpec | None = None,
) -> Task:
    """The ARES task of one instance (see the module docstring for the image rules)."""
    if not instance.has_gold_patch:
        raise TaskError(f"{instance.source}: instance {instance.instance_id} has no gold patch")
    image, requested = _image(instance, image_template, images_dir)
    spec = spec or SweSpec()
    parser = instance.log_parser or spec.log_parser
    official = "sweb.eval." in requested
    if instance.expected_output is not None:
        script = r2e.eval_script(instance.test_cmd or r2e.RUN_TESTS, TESTS_DIR)
    elif instance.eval_script:
        script = instance.eval_script
    else:
        script = make_eval_script(
            instance.base_commit,
            instance.test_patch,
            test_cmd=instance.test_cmd or spec.test_cmd,
            env_setup=OFFICIAL_ENV_SETUP if official else (),
        )
    hidden = {f"{r2e.TESTS_DIR}/{name}": code for name, code in (instance.hidden_tests or {}).items()}
    verification = SweVerification(
        instance_id=instance.instance_id,
        base_commit=instance.base_commit,
        eval_script=script,
        fail_to_pass=instance.fail_to_pass,
        pass_to_pass=instance.pass_to_pass,
        log_parser=parser,
        version=instance.version,
        expected_output=instance.expected_output,
        hidden_files=hidden,
        test_roots=changes.test_roots(
            [f.path for f in patch_files(instance.test_patch)] + ([r2e.TESTS_DIR] if hidden else [])
        ),
    )
    return Task(
        id=instance.instance_id,
        instruction=_INSTRUCTION.format(statement=clean_statement(instance).strip()),
        tests={},
        image=image,
        network=False,
        workdir=WORKDIR,
        outputs=(WORKDIR,),
        solution={"solve.sh": SOLVE_SH, "fix.patch": instance.patch},
        verification=verification,
        source="swebench",
        metadata=_metadata(instance, requested),
    )


def _image(instance: SweInstance, template: str | None, images_dir: Path | None) -> tuple[ImageSpec, str]:
    """The image to run and what the instance asked for. A Dockerfile dir of the set's own is used as
    it is (it cuts its history itself); a named image runs through ``hygiene.clean_image``, which
    removes every commit after ``base_commit``."""
    provides = (images_dir.resolve(),) if images_dir is not None else ()
    if not instance.image and template is None and images_dir is not None:
        candidate = images_dir / "instances" / instance.instance_id
        if (candidate / "Dockerfile").is_file():
            spec = ImageSpec(dockerfile_dir=candidate.resolve(), image_dirs=provides)
            return spec, str(candidate.resolve())
    name = image_for(instance, template)
    extra = r2e.HIDE_STEPS if instance.expected_output is not None else ()
    return replace(clean_image(name, instance.base_commit, extra=extra), image_dirs=provides), name


def _metadata(instance: SweInstance, image: str) -> dict[str, Any]:
    return {
        "instance_id": instance.instance_id,
        "repo": instance.repo,
        "base_commit": instance.base_commit,
        "version": instance.version,
        "format": instance.format,
        "FAIL_TO_PASS": list(instance.fail_to_pass),
        "PASS_TO_PASS": list(instance.pass_to_pass),
        "image": image,
        "source": instance.source,
    }


def load_swe_tasks(
    path: str | Path | None = None,
    *,
    split: str | None = None,
    image_template: str | None = None,
) -> list[Task]:
    """The tasks of a SWE instance file or directory (``--path``), in file order."""
    if path is None:
        raise TaskError(
            "the swebench presets need instances: --path FILE|DIR (a .jsonl/.json/.parquet file or a "
            "dataset dir; make('swebench', path=...) in Python)"
        )
    if image_template is not None:
        check_template(image_template)
    source = Path(path)
    if not source.exists():
        raise TaskError(f"--path {source} does not exist; pass a .jsonl/.json/.parquet file or a directory")
    base = source if source.is_dir() else source.parent
    specs = load_specs(base / "specs.json")
    images_dir = base / "images"
    dataset = load_swe_instances(source, split=split)
    return [
        swe_task(
            instance,
            image_template=image_template,
            images_dir=images_dir if images_dir.is_dir() else None,
            spec=specs.get((instance.repo, instance.version)),
        )
        for instance in dataset
    ]
