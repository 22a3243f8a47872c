"""Daemonless image pulls against the engines' own pull, side by side, from a registry on loopback.

Pushes a ≥ 400 MB image of six layers (the Debian base ``scripts/podman-engine.sh image`` imports
plus five layers of 40 MB random bytes and a text file each, built once with podman) to a Debian
``docker-registry`` on 127.0.0.1, then in each round, into fresh storage every time:

- ``ares``: ``ares images pull`` as a whole process (download, verify, extract into the layer store);
- ``podman``: ``podman pull`` into a fresh ``--root`` (overlay driver);
- ``skopeo+umoci``: ``skopeo copy docker://… oci:DIR`` then ``umoci unpack`` into a bundle.

Then, with ARES only: a second pull of the same image (bytes moved, expected 0); 20 concurrent
sandboxes of one new image starting at once (blob downloads per layer, counted from the registry's
access log, expected 1 each); sandbox start + first exec on the pulled image (p50).

    .venv/bin/python bench/image_pull.py [--rounds 3] [--starts 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from _common import machine_info, start_exec_figures
from ares.images.cache import ImageCache
from ares.images.pull import pull_image
from ares.sandbox.base import ImageSpec, SandboxSpec

BASE = "localhost/ares-debian:bookworm"
BENCH_IMAGE = "localhost/ares-bench:big"
CONTAINERFILE = f"FROM {BASE}\n" + "".join(
    f"RUN head -c 40M /dev/urandom > /opt/blob{i} && seq 1 2000000 > /opt/text{i}\n" for i in range(1, 6)
)
BLOB_GET = re.compile(r'"GET /v2/[^ ]+/blobs/(sha256:[0-9a-f]{64}) HTTP')


def sh(*argv: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kwargs)


def ensure_bench_image(workdir: Path) -> None:
    """The six-layer image in podman's storage, built once (``podman build --isolation=chroot``)."""
    if subprocess.run(["podman", "image", "exists", BENCH_IMAGE]).returncode == 0:
        return
    if subprocess.run(["podman", "image", "exists", BASE]).returncode != 0:
        sys.exit(f"{BASE} is missing: run `bash scripts/podman-engine.sh image` first")
    context = workdir / "context"
    context.mkdir()
    (context / "Containerfile").write_text(CONTAINERFILE)
    sh("podman", "build", "-q", "--isolation=chroot", "-t", BENCH_IMAGE, str(context))


class Registry:
    """``docker-registry serve`` on a free loopback port, access log on, storage under ``root``."""

    def __init__(self, root: Path) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.log = root / "registry.log"
        config = root / "config.yml"
        config.write_text(
            "version: 0.1\nlog:\n  level: info\n"
            f"storage:\n  filesystem:\n    rootdirectory: {root / 'storage'}\n"
            f"http:\n  addr: 127.0.0.1:{self.port}\n"
        )
        self.proc = subprocess.Popen(
            ["docker-registry", "serve", str(config)], stdout=self.log.open("wb"), stderr=subprocess.STDOUT
        )
        for _ in range(400):
            try:
                httpx.get(f"http://{self.host}/v2/", timeout=1)
                return
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError("docker-registry did not start")

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def blob_gets(self) -> Counter[str]:
        return Counter(BLOB_GET.findall(self.log.read_text(errors="replace")))

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def timed(argv: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    result = subprocess.run(argv, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed ({result.returncode}): {result.stderr[-2000:]}")
    return elapsed


def ares_env(cache: Path, registry: Registry) -> dict[str, str]:
    return {**os.environ, "ARES_CACHE_DIR": str(cache), "ARES_INSECURE_REGISTRIES": registry.host}


def cold_round(workdir: Path, registry: Registry, ref: str, order: int) -> dict[str, float]:
    """One cold pull by each tool into fresh storage; returns wall seconds per tool.

    The tools take turns going first (``order``), and the disk is synced before each, so one tool's
    writeback or discards do not land on the next one's clock.
    """
    fresh = Path(tempfile.mkdtemp(dir=workdir))
    runroot = Path(tempfile.mkdtemp(prefix="arp-"))  # podman wants a runroot under 50 characters
    oci = f"oci:{fresh}/oci:big"
    runs: dict[str, list[list[str]]] = {
        "ares": [[sys.executable, "-m", "ares.cli.main", "images", "pull", ref]],
        "podman": [
            [
                "podman",
                "--root",
                str(fresh / "podman-root"),
                "--runroot",
                str(runroot),
                "--storage-driver",
                "overlay",
                "pull",
                "-q",
                "--tls-verify=false",
                f"docker://{ref}",
            ]
        ],
        "skopeo+umoci": [
            ["skopeo", "copy", "-q", "--src-tls-verify=false", f"docker://{ref}", oci],
            ["umoci", "unpack", "--image", f"{fresh}/oci:big", str(fresh / "bundle")],
        ],
    }
    tools = list(runs)
    tools = tools[order % len(tools) :] + tools[: order % len(tools)]
    try:
        seconds = {}
        for tool in tools:
            os.sync()
            env = ares_env(fresh / "ares", registry) if tool == "ares" else None
            seconds[tool] = sum(timed(argv, env=env) for argv in runs[tool])
        return seconds
    finally:
        storage = ["--root", str(fresh / "podman-root"), "--runroot", str(runroot)]
        subprocess.run(
            ["podman", *storage, "--storage-driver", "overlay", "system", "reset", "-f"], capture_output=True
        )
        shutil.rmtree(fresh, ignore_errors=True)
        shutil.rmtree(runroot, ignore_errors=True)
        os.sync()


async def ares_only(workdir: Path, registry: Registry, ref: str, starts: int) -> dict[str, Any]:
    """Second pull, concurrent first starts of a new image, and starts on the pulled image."""
    from ares.sandbox.local import LocalSandbox
    from ares.sandbox.local.images import set_default_builder

    os.environ["ARES_INSECURE_REGISTRIES"] = registry.host
    cache = ImageCache(workdir / "warm")
    first = await pull_image(ref, cache=cache)
    again = await pull_image(ref, cache=cache)
    # A cache that has never seen the image: ``starts`` sandboxes of it start at once.
    os.environ["ARES_CACHE_DIR"] = str(workdir / "concurrent")
    set_default_builder(None)
    spec = SandboxSpec(image=ImageSpec(name=ref), workdir="/")
    sandboxes = [LocalSandbox(spec) for _ in range(starts)]
    before = registry.blob_gets()
    started = time.perf_counter()
    await asyncio.gather(*(s.start() for s in sandboxes))
    concurrent_s = time.perf_counter() - started
    results = await asyncio.gather(*(s.exec("cat /opt/text5 | wc -l") for s in sandboxes))
    await asyncio.gather(*(s.stop() for s in sandboxes))
    gets = registry.blob_gets() - before
    blob_gets = list(gets.values())  # the config and every layer blob: each fetched once, by one of them
    # Starts on the pulled image: the first in this process (loads the image record), then p50.
    os.environ["ARES_CACHE_DIR"] = str(workdir / "warm")
    set_default_builder(None)
    t0 = time.perf_counter()
    sandbox = LocalSandbox(spec)
    await sandbox.start()
    first_start_s = time.perf_counter() - t0
    await sandbox.stop()
    figures = await start_exec_figures(LocalSandbox, spec, starts=starts, execs=50)
    return {
        "first_pull": {"bytes_downloaded": first.bytes_downloaded, "layers": len(first.diff_ids)},
        "second_pull": {"bytes_downloaded": again.bytes_downloaded, "layers": again.layers_downloaded},
        "concurrent_first_starts": {
            "sandboxes": starts,
            "seconds": round(concurrent_s, 3),
            "all_ran": all(r.exit_code == 0 and r.stdout.strip() == "2000000" for r in results),
            "blobs_fetched": len(blob_gets),
            "gets_per_blob_max": max(blob_gets, default=0),
            "layers": len(first.diff_ids),
        },
        "first_start_ms_after_pull": round(first_start_s * 1e3, 2),
        "sandbox_on_pulled_image": figures,
    }


def pair_ratio(rounds: list[dict[str, float]], other: str) -> dict[str, float]:
    ratios = sorted(r[other] / r["ares"] for r in rounds)
    return {
        "median": round(statistics.median(ratios), 3),
        "min": round(ratios[0], 3),
        "max": round(ratios[-1], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--starts", type=int, default=20)
    args = parser.parse_args()
    for tool in ("podman", "skopeo", "umoci", "docker-registry"):
        if shutil.which(tool) is None:
            sys.exit(f"needs {tool} (apt-get install podman skopeo umoci docker-registry)")
    workdir = Path(tempfile.mkdtemp(prefix="ares-bench-pull-", dir="/var/tmp"))
    registry = Registry(workdir)
    try:
        ensure_bench_image(workdir)
        ref = f"{registry.host}/ares/bench:big"
        sh("podman", "push", "-q", "--tls-verify=false", BENCH_IMAGE, f"docker://{ref}")
        size = int(sh("podman", "image", "inspect", BENCH_IMAGE, "--format", "{{.Size}}").stdout)
        rounds = [cold_round(workdir, registry, ref, order) for order in range(args.rounds)]
        cold = {tool: [r[tool] for r in rounds] for tool in rounds[0]}
        medians = {tool: statistics.median(times) for tool, times in cold.items()}
        extra = asyncio.run(ares_only(workdir, registry, ref, args.starts))
    finally:
        registry.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        json.dumps(
            {
                "bench": "image_pull",
                "machine": machine_info(),
                "image": {"uncompressed_bytes": size, "layers": 6},
                "cold_pull_s": {
                    tool: {"median": round(m, 3), "all": [round(t, 3) for t in cold[tool]]}
                    for tool, m in medians.items()
                },
                # Per round (same sitting, same disk state), then the median: > 1 means ARES was faster.
                "ratio_podman_over_ares": pair_ratio(rounds, "podman"),
                "ratio_skopeo_umoci_over_ares": pair_ratio(rounds, "skopeo+umoci"),
                **extra,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
