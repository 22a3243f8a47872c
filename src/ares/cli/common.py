"""What every ``ares`` command shares: one-line errors (exit 2) and the app that prints them.

Messages are plain text: they often hold ``pip install 'ares[docker]'``-style hints, paths and
Dockerfile lines, which Rich would read as markup, so they are escaped before printing.
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

try:  # typer >= 0.26 ships its own copy of click (and no longer depends on click)
    from typer._click import exceptions as _click
except ImportError:  # pragma: no cover - older typer raises click's own exceptions
    from click import exceptions as _click  # type: ignore[no-redef]

_NO_ARGS = getattr(_click, "NoArgsIsHelpError", ())

err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(message: str) -> typer.Exit:
    """Print ``error: message`` on one line of stderr; raise the result to exit with code 2."""
    err_console.print(f"[bold red]error:[/] {escape(one_line(message))}")
    return typer.Exit(code=2)


def warn(message: str) -> None:
    """Print ``warning: message`` on one line of stderr (the run goes on)."""
    err_console.print(f"[yellow]warning:[/] {escape(one_line(message))}")


def one_line(message: str) -> str:
    """``message`` with its lines joined: a configuration error is one line."""
    return " ".join(part.strip() for part in message.strip().splitlines() if part.strip())


class App(typer.Typer):
    """A Typer app whose usage errors (unknown option, bad value, missing argument) are one line.

    Typer shows them as a framed panel of five or more lines; here they read
    ``error: Invalid value for '--concurrency' / '-c': ... (see 'ares run --help')`` and exit 2.
    """

    #: The arguments of the command line being run (what an interrupted ``ares run`` repeats).
    invoked_args: tuple[str, ...] = ()

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
            err_console.print(f"[bold red]error:[/] {escape(one_line(message))}")
            _exit(exc.exit_code)
        except _click.ClickException as exc:
            err_console.print(f"[bold red]error:[/] {escape(one_line(exc.format_message()))}")
            _exit(exc.exit_code)
        except typer.Abort:
            err_console.print("aborted")
            _exit(130)
        _exit(code if isinstance(code, int) else 0)


def _exit(code: int) -> NoReturn:
    sys.stdout.flush()
    raise SystemExit(code)
