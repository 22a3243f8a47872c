"""The end of ``ares run``: the summary table, then what went wrong (errors grouped by cause, the
failed and errored tasks) and the groups of rollouts, in plain words.

Whatever console it gets, what it prints is literal: task ids and error messages are ``Text``, never
read as Rich markup."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ares.errors import clip_error
from ares.rollout.results import RunSummary

#: Task ids listed per line (failed, errored) before "... and N more".
MAX_TASK_IDS = 20
#: Groups listed one by one (all are in summary.json).
MAX_GROUPS = 20
_MESSAGE_CHARS = 300


def print_summary(console: Console, summary: RunSummary, out_dir: Path) -> None:
    table = Table(title="ARES run summary", show_header=False)
    rows = [
        ("episodes", _episodes(summary)),
        ("mean reward", f"{summary.mean_reward:.3f}" + _of_scored(summary) if summary.scored else "-"),
        ("pass rate", f"{summary.pass_rate:.1%}" + _of_scored(summary) if summary.scored else "-"),
        ("statuses", ", ".join(f"{k}={v}" for k, v in sorted(summary.statuses.items()))),
        ("mean steps", f"{summary.mean_steps:.2f}"),
        ("wall time", f"{summary.wall_time_s:.1f}s"),
        ("p50 step latency", _ms(summary.p50_step_latency_s)),
        ("p50 policy latency", _ms(summary.p50_policy_latency_s)),
    ]
    if summary.prompt_tokens is not None or summary.completion_tokens is not None:
        rows.append(
            ("tokens", f"{summary.prompt_tokens or 0} prompt, {summary.completion_tokens or 0} completion")
        )
    if summary.cost_usd is not None:
        rows.append(("cost", f"${summary.cost_usd:.4f}"))
    if summary.groups:
        rows.append(("groups", _groups_line(summary)))
    if summary.blames:
        blames = ", ".join(f"{k}={v}" for k, v in sorted(summary.blames.items()))
        refilled = f"; {summary.refills} refilled" if summary.refills else ""
        rows.append(("blame", f"{blames}; {summary.masked} masked for training{refilled}"))
    rows.append(("results", str(out_dir)))
    for key, value in rows:
        table.add_row(key, Text(value))
    console.print(table)
    _print_groups(console, summary)
    _print_failures(console, summary, out_dir)


def _episodes(summary: RunSummary) -> str:
    if not summary.errored:
        return str(summary.episodes)
    return f"{summary.episodes} ({summary.scored} scored, {summary.errored} errored)"


def _of_scored(summary: RunSummary) -> str:
    return f" (of {summary.scored} scored)" if summary.errored else ""


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f} ms"


def _groups_line(summary: RunSummary) -> str:
    groups = summary.groups
    sizes = sorted({g.size for g in groups})
    size = str(sizes[0]) if len(sizes) == 1 else "/".join(map(str, sizes))
    with_errors = sum(1 for g in groups if g.errored)
    text = f"{len(groups)} of {size}"
    if with_errors:
        text += f", {with_errors} with errored episodes"
    if summary.uninformative:  # no group-relative advantage to learn from (``group_agreement``)
        flat = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(summary.uninformative.items()))
        text += f"; without signal: {flat}"
    return text


def _print_groups(console: Console, summary: RunSummary) -> None:
    if not summary.groups:
        return
    table = Table("group", "task", "size", "errored", "mean reward", "pass rate", title="groups")
    for group in summary.groups[:MAX_GROUPS]:
        mean = "-" if group.mean_reward is None else f"{group.mean_reward:.3f}"
        rate = "-" if group.pass_rate is None else f"{group.pass_rate:.0%}"
        errored = Text(str(group.errored), style="red" if group.errored else "")
        table.add_row(str(group.group), Text(group.task_id), str(group.size), errored, mean, rate)
    console.print(table)
    if len(summary.groups) > MAX_GROUPS:
        console.print(
            Text(f"... and {len(summary.groups) - MAX_GROUPS} more groups (summary.json has them all)"),
            soft_wrap=True,
        )


def _print_failures(console: Console, summary: RunSummary, out_dir: Path) -> None:
    if summary.errors:
        console.print(
            Text.assemble(
                ("errors", "bold red"), f" ({summary.errored} episodes, {len(summary.errors)} distinct):"
            ),
            soft_wrap=True,
        )
        for error in summary.errors:
            lines = error.message.strip().splitlines() or ["(no message)"]
            message = clip_error(lines[0], _MESSAGE_CHARS)  # the problem's middle goes, never its remedy
            more = f" [+{len(lines) - 1} lines]" if len(lines) > 1 else ""
            example = f"e.g. episode {error.example_index} ({error.example_task_id})"
            line = Text.assemble(
                "  ", (f"{error.count}x", "red"), f" {error.type}: {message}{more}  ", (example, "dim")
            )
            console.print(line, soft_wrap=True)
        console.print(
            Text(f"  full errors and tracebacks: {out_dir / 'episodes'}/*.json", style="dim"), soft_wrap=True
        )
    if summary.errored_task_ids:
        console.print(
            Text(f"errored tasks ({len(summary.errored_task_ids)}): {_ids(summary.errored_task_ids)}"),
            soft_wrap=True,
        )
    if summary.failed_task_ids:
        console.print(
            Text(f"failed tasks ({len(summary.failed_task_ids)}): {_ids(summary.failed_task_ids)}"),
            soft_wrap=True,
        )


def _ids(ids: tuple[str, ...]) -> str:
    shown = ", ".join(ids[:MAX_TASK_IDS])
    return f"{shown}, ... and {len(ids) - MAX_TASK_IDS} more" if len(ids) > MAX_TASK_IDS else shown
