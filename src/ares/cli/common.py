"""What every ``ares`` command shares: one-line errors (exit 2), literal output, and the app.

Everything the CLI prints is plain text: messages often hold ``pip install 'ares[docker]'``-style
hints, ``os/arch[/variant]``, paths, image references and exception texts, which Rich would read
as console markup (swallowing ``[docker]``, or failing on ``[/variant]``). So no console here reads
markup (``plain_console``; styles go on ``rich.text.Text`` around the data), and help texts are
shown as written (``App``: Typer's ``rich_markup_mode=None``, click's plain help layout).
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperGroup

try:  # typer >= 0.26 ships its own copy of click (and no longer depends on click)
    from typer._click import exceptions as _click
except ImportError:  # pragma: no cover - older typer raises click's own exceptions
    from click import exceptions as _click  # type: ignore[no-redef]

_NO_ARGS = getattr(_click, "NoArgsIsHelpError", ())

#: Words of a command's first sentence shown in its group's list: all of them (click would cut it).
_WHOLE_SENTENCE = 10_000


def plain_console(*, stderr: bool = False, **options: Any) -> Console:
    """A console that prints strings as they are: no markup, no ``:emoji:`` codes, no highlighting."""
    return Console(stderr=stderr, markup=False, emoji=False, highlight=False, **options)


err_console = plain_console(stderr=True, soft_wrap=True)


def fail(message: str) -> typer.Exit:
    """Print ``error: message`` on one line of stderr; raise the result to exit with code 2."""
    _say_error(one_line(message))
    return typer.Exit(code=2)


def warn(message: str) -> None:
    """Print ``warning: message`` on one line of stderr (the run goes on)."""
    err_console.print(Text.assemble(("warning:", "yellow"), " ", one_line(message)))


#: Flags renamed so that one word means one thing (a rollout trace in the records, a span trace of
#: the run): the old names still work for one release, with a warning.
RENAMED_FLAGS = {"--trace": "--rollout-trace", "--trace-file": "--span-trace"}


def warn_renamed_flags(args: tuple[str, ...]) -> None:
    """One warning per old flag name among ``args`` (``--name`` or ``--name=value``)."""
    for name in dict.fromkeys(arg.partition("=")[0] for arg in args):
        if name in RENAMED_FLAGS:
            warn(f"{name} is now {RENAMED_FLAGS[name]}; the old name goes in the next release")


def _say_error(line: str) -> None:
    err_console.print(Text.assemble(("error:", "bold red"), " ", line))


def one_line(message: str) -> str:
    """``message`` with its lines joined: a configuration error is one line."""
    return " ".join(part.strip() for part in message.strip().splitlines() if part.strip())


class _Group(TyperGroup):
    """Plain help that lists each subcommand with its whole first sentence (click cuts it to fit)."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=_WHOLE_SENTENCE)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


class App(typer.Typer):
    """A Typer app whose help is shown as written and whose usage errors are one line.

    Help: no Rich markup is read (``rich_markup_mode=None``, for the app and, through it, every
    command and sub-app), so ``[/variant]`` or ``ares[docker]`` in a docstring or ``help=`` stays.
    Usage errors (unknown option, bad value, missing argument): Typer shows a framed panel of five or
    more lines; here they read ``error: Invalid value for '--concurrency' / '-c': ... (see 'ares run
    --help')`` and exit 2.
    """

    #: The arguments of the command line being run (what an interrupted ``ares run`` repeats).
    invoked_args: tuple[str, ...] = ()

    def __init__(self, **options: Any) -> None:
        super().__init__(rich_markup_mode=None, cls=_Group, **options)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("standalone_mode", False)
        given = kwargs.get("args", args[0] if args else None)
        self.invoked_args = tuple(sys.argv[1:] if given is None else given)
        try:
            code = super().__call__(*args, **kwargs)
        except _NO_ARGS as exc:  # type: ignore[misc]
            ctx = getattr(exc, "ctx", None)
            print(ctx.get_help() if ctx is not None else str(exc), file=sys.stderr)
            _exit(2)
        except _click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx else "ares"
            message = f"{exc.format_message()} (see '{where} --help')"
            _say_error(one_line(message))
            _exit(exc.exit_code)
        except _click.ClickException as exc:
            _say_error(one_line(exc.format_message()))
            _exit(exc.exit_code)
        except typer.Abort:
            err_console.print("aborted")
            _exit(130)
        _exit(code if isinstance(code, int) else 0)


def _exit(code: int) -> NoReturn:
    sys.stdout.flush()
    raise SystemExit(code)
