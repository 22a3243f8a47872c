"""Fixtures of the task tests."""

from swe_images import project_images

__all__ = ["project_images"]
