"""Old import paths of moved modules still import, as the very same module, and warn."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from ares.moved import MOVED, new_name


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_an_old_path_is_the_new_module_and_warns(old: str, new: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)


def test_a_submodule_of_a_moved_package_is_never_loaded_twice() -> None:
    code = (
        "import sys, warnings; warnings.simplefilter('error', DeprecationWarning)\n"
        "import ares.factory.mutate.registry as new\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        "import ares.tasks.synth.mutate.registry as old\n"
        "from ares.tasks.synth.mutate import registry\n"
        "assert old is new is registry, (old, new)\n"
        "assert new.__name__ == new.__spec__.name == 'ares.factory.mutate.registry'\n"
        "aliases = {k: m.__name__ for k, m in sys.modules.items() if k.startswith('ares.tasks.synth')}\n"
        "assert all(name.startswith('ares.factory') for name in aliases.values()), aliases\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_names_that_did_not_move_are_left_to_the_import_system() -> None:
    assert new_name("ares.tasks.swe.load") is None
    assert new_name("ares.tasks.synthetic") is None  # a prefix of a name is not its package
    assert new_name("ares.tasks.synth.mutate") == "ares.factory.mutate"
