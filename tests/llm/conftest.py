"""The converter tests' shared checks live in ``wire_kit``: let pytest explain their failed asserts too."""

import pytest

pytest.register_assert_rewrite("wire_kit")
