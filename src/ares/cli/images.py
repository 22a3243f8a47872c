"""``ares images build|list|prune``: the local image cache from the command line."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ares.cli.common import fail
from ares.errors import AresError
from ares.images.build.builder import ImageBuilder, LocalImage
from ares.images.cache import ImageCache
from ares.sandbox.local.images import local_builder

app = typer.Typer(
    help="Build and manage local sandbox images (Dockerfiles -> cached layers).", no_args_is_help=True
)
console = Console()

CacheOption = Annotated[
    Path | None, typer.Option("--cache-dir", help="Image cache (default: $ARES_CACHE_DIR or ~/.cache/ares).")
]


def _fail(message: str) -> typer.Exit:
    return fail(message)


def dockerfile_dirs(path: Path) -> list[Path]:
    """Build contexts under ``path``: a Dockerfile dir, a Harbor task dir, or a dataset of tasks."""
    if (path / "Dockerfile").is_file():
        return [path]
    if (path / "environment" / "Dockerfile").is_file():
        return [path / "environment"]
    found = sorted(p.parent for p in path.glob("*/environment/Dockerfile"))
    if not found:
        raise AresError(f"no Dockerfile in {path}, {path}/environment or {path}/*/environment")
    return found


@app.command()
def build(
    path: Annotated[Path, typer.Argument(help="A Dockerfile dir, a Harbor task dir or a dataset dir.")],
    tag: Annotated[
        list[str] | None, typer.Option("--tag", "-t", help="Name for the image (repeatable).")
    ] = None,
    build_arg: Annotated[
        list[str] | None, typer.Option("--build-arg", help="KEY=VALUE (repeatable).")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only print the summary.")] = False,
    cache_dir: CacheOption = None,
) -> None:
    """Build images into the cache; unchanged steps come from the cache."""
    args = {}
    for item in build_arg or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise _fail(f"--build-arg expects KEY=VALUE, got {item!r}")
        args[key] = value
    try:
        contexts = dockerfile_dirs(path)
    except AresError as exc:
        raise _fail(str(exc)) from None
    builder = local_builder(
        ImageCache(cache_dir),
        on_log=None if quiet else lambda line: console.print(line, highlight=False, markup=False),
    )
    try:
        images = asyncio.run(_build_all(builder, contexts, args, tuple(tag or ())))
    except AresError as exc:
        raise _fail(str(exc)) from None
    for context, (image, seconds) in zip(contexts, images, strict=True):
        built = sum(not s.cached for s in image.steps)
        console.print(
            f"[green]built[/] {image.key[:12]} from {escape(str(context))} in {seconds:.1f}s "
            f"({len(image.steps) - built} cached, {built} built; log {escape(str(image.log_path))})",
            highlight=False,
            soft_wrap=True,
        )


async def _build_all(
    builder: ImageBuilder, contexts: list[Path], args: dict[str, str], tags: tuple[str, ...]
) -> list[tuple[LocalImage, float]]:
    results = []
    for context in contexts:
        started = time.monotonic()
        image = await builder.build(context, build_args=args, tags=tags)
        results.append((image, time.monotonic() - started))
    return results


@app.command("list")
def list_images(cache_dir: CacheOption = None) -> None:
    """List built images, most recently used first."""
    cache = ImageCache(cache_dir)
    table = Table("image", "tags", "base", "layers", "size", "built", "source")
    for record in cache.images():
        layers = [cache.layer(k) for k in record.layers]
        size = sum(layer.size_bytes for layer in layers if layer is not None)
        built = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.created))
        table.add_row(
            record.key[:12], ", ".join(record.tags) or "-", record.base, str(len(record.layers)),
            f"{size / 1e6:.1f} MB", built, record.source,
        )  # fmt: skip
    console.print(table)
    console.print(f"cache: {cache.root}", highlight=False)


@app.command()
def prune(
    all_: Annotated[
        bool, typer.Option("--all", help="Remove every image and layer, not only unused layers.")
    ] = False,
    cache_dir: CacheOption = None,
) -> None:
    """Remove layers no image uses (with --all: everything but the base root filesystems)."""
    removed = ImageCache(cache_dir).prune(everything=all_)
    for item in removed:
        console.print(f"removed {item}", highlight=False)
    console.print(f"{len(removed)} removed", highlight=False)
