"""A Gymnasium-style loop over ARES: a random "policy" of shell commands, no training.

Each episode is one HumanEval task in the local sandbox. The policy picks random harmless commands
and, with some probability, submits; the verifier's reward arrives on the last step. Actions are
plain text (the assistant's reply), observations the conversation as OpenAI chat messages, so the loop
looks like any other Gymnasium loop.

    .venv/bin/python examples/gym_random_agent.py [--episodes 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import random

import gymnasium

import ares.wrappers.gym  # noqa: F401  (registers the "ares/<preset>" ids)
from ares.agents.bash import BashActionFormat

COMMANDS = ("ls -la", "pwd", "python3 --version", "cat /etc/os-release | head -n 2", "echo hello")


def random_reply(rng: random.Random, submit_probability: float) -> str:
    """The assistant's reply text: a bash block the ARES bash agent runs (or its submit command)."""
    speak = BashActionFormat()
    reply = speak.submit() if rng.random() < submit_probability else speak.command(rng.choice(COMMANDS))
    return reply.content or ""


def main(episodes: int, seed: int) -> list[dict[str, object]]:
    rng = random.Random(seed)
    env = gymnasium.make(
        "ares/humaneval", tasks="0:5", step_limit=6, observation="messages", action="text", render_mode="ansi"
    )
    results = []
    try:
        for episode in range(episodes):
            observation, info = env.reset(seed=seed + episode)
            assert env.observation_space.contains(observation)
            total, steps, terminated, truncated = 0.0, 0, False, False
            while not (terminated or truncated):
                action = random_reply(rng, submit_probability=0.3)
                observation, reward, terminated, truncated, info = env.step(action)
                total += float(reward)
                steps += 1
            results.append(
                {"task": info["task_id"], "steps": steps, "return": total, "status": info["status"],
                 "terminated": terminated, "truncated": truncated}
            )  # fmt: skip
            print(f"episode {episode}: {results[-1]}")
        print(env.render().splitlines()[0])  # the last episode's transcript, first line
    finally:
        env.close()
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    main(args.episodes, args.seed)
