"""``ares images build|pull|list|prune``: built and pulled images from the command line."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from ares.cli.common import App, fail, plain_console
from ares.cli.images_pull import pull
from ares.errors import AresError
from ares.images.build.builder import ImageBuilder, LocalImage
from ares.images.cache import ImageCache
from ares.images.pull import image_store
from ares.images.store import BuildCacheRoots, usage
from ares.images.store import prune as prune_store
from ares.sandbox.local.images import local_builder

app = App(help="Build, pull and manage local sandbox images (no daemon).", no_args_is_help=True)
app.command("pull")(pull)
console = plain_console()

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
    target: Annotated[
        str | None,
        typer.Option("--target", help="Build up to this stage (name or index); default: the last."),
    ] = None,
    fallback: Annotated[
        str | None,
        typer.Option(
            "--fallback",
            help="off | standin (a stand-in base when no registry is reachable) | offline (stand-ins without "
            "asking a registry). Default: $ARES_IMAGE_FALLBACK, else off.",
        ),
    ] = None,
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
    try:
        builder = local_builder(
            ImageCache(cache_dir),
            on_log=None if quiet else console.print,
            fallback=fallback,
        )
        images = asyncio.run(_build_all(builder, contexts, args, tuple(tag or ()), target))
    except AresError as exc:
        raise _fail(str(exc)) from None
    for context, (image, seconds) in zip(contexts, images, strict=True):
        built = sum(not s.cached for s in image.steps)
        line = (
            f" {image.key[:12]} from {context} in {seconds:.1f}s "
            f"({len(image.steps) - built} cached, {built} built; log {image.log_path})"
        )
        console.print(Text.assemble(("built", "green"), line), soft_wrap=True)
        for sub in image.substitutions:
            console.print(Text.assemble(("note", "yellow"), " ", sub.describe()), soft_wrap=True)


def _base_text(base: str, substitutions: tuple[dict[str, str], ...]) -> str:
    """``ares/host-python (stand-in for python:3.11-slim)`` when a stand-in served a named image."""
    asked = ", ".join(s["requested"] for s in substitutions)
    return f"{base} (stand-in for {asked})" if asked else base


async def _build_all(
    builder: ImageBuilder,
    contexts: list[Path],
    args: dict[str, str],
    tags: tuple[str, ...],
    target: str | None = None,
) -> list[tuple[LocalImage, float]]:
    results = []
    for context in contexts:
        started = time.monotonic()
        image = await builder.build(context, build_args=args, tags=tags, target=target)
        results.append((image, time.monotonic() - started))
    return results


@app.command("list")
def list_images(cache_dir: CacheOption = None) -> None:
    """List pulled and built images, most recently used first, with their disk use."""
    cache = ImageCache(cache_dir)
    table = Table("image", "id", "kind", "layers", "size", "shared", "last used", "from")
    rows: list[tuple[float, tuple[str, ...]]] = []
    for use in usage(image_store(cache)):
        record = use.record
        rows.append((record.last_used, (
            ", ".join(use.names), record.manifest_digest[7:19], "pulled", str(use.layers),
            _mb(use.size_bytes), _mb(use.shared_bytes), _when(record.last_used), record.transport,
        )))  # fmt: skip
    for built in cache.images():
        layers = [cache.layer(k) for k in built.layers]
        size = sum(layer.size_bytes for layer in layers if layer is not None)
        rows.append((built.last_used, (
            ", ".join(built.tags) or "-", built.key[:12], "built", str(len(built.layers)), _mb(size), "-",
            _when(built.last_used), _base_text(built.base, built.substitutions),
        )))  # fmt: skip
    for _, row in sorted(rows, key=lambda r: r[0], reverse=True):
        table.add_row(*row)
    console.print(table)
    console.print(f"cache: {cache.root}")


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp))


@app.command()
def prune(
    all_: Annotated[
        bool, typer.Option("--all", help="Remove every image and layer, not only unused layers.")
    ] = False,
    cache_dir: CacheOption = None,
) -> None:
    """Remove layers no image uses (with --all: every image too, but the base root filesystems).

    Pulled images that a built image stacks on are kept while the built image is.
    """
    cache = ImageCache(cache_dir)
    removed = cache.prune(everything=all_)
    for item in removed:
        console.print(f"removed {item}")
    try:
        report = asyncio.run(
            prune_store(image_store(cache), everything=all_, roots=[BuildCacheRoots(cache.root)])
        )
    except AresError as exc:
        raise _fail(str(exc)) from None
    for image in report.images:
        console.print(f"removed pulled image {image}")
    for diff_id in report.layers:
        console.print(f"removed pulled layer {diff_id[7:19]}")
    for failure in report.failures:
        console.print(Text(f"could not remove {failure}", style="yellow"))
    count = len(removed) + len(report.images) + len(report.layers)
    console.print(f"{count} removed, {_mb(report.freed_bytes)} of pulled layers freed")
