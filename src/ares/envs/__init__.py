"""Environments: CodeEnvironment and the Episode record it keeps."""

from ares.envs.code_env import CodeEnvironment, TaskSelector
from ares.envs.episode import Episode, ErrorInfo

__all__ = ["CodeEnvironment", "Episode", "ErrorInfo", "TaskSelector"]
