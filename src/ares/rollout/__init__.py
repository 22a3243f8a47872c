"""Rollouts: run many episodes concurrently and summarize them."""

from ares.rollout.runner import EpisodeResult, RunSummary, run_episode, run_episodes

__all__ = ["EpisodeResult", "RunSummary", "run_episode", "run_episodes"]
