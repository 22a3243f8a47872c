"""A decompression bomb read from a file is refused like one from a registry, with bounded pieces."""

from __future__ import annotations

import gzip
import hashlib
import io

import pytest

from ares.images.errors import ImageError
from ares.images.registry.limits import Limits
from ares.images.sources._stream import stream_layer
from ares.images.sources.base import SourceLayer

MiB = 1 << 20


async def test_a_layer_that_inflates_past_the_cap_is_refused_naming_it() -> None:
    raw = bytes(64 * MiB)  # zeros: compresses about a thousandfold
    blob = gzip.compress(raw, compresslevel=9)
    layer = SourceLayer(
        digest="sha256:" + hashlib.sha256(blob).hexdigest(),
        diff_id="sha256:" + hashlib.sha256(raw).hexdigest(),
        media_type="application/vnd.oci.image.layer.v1.tar+gzip",
        size=len(blob),
    )
    received: list[int] = []

    async def sink(data: bytes) -> None:
        received.append(len(data))

    limits = Limits(layer_ratio=10, layer_floor=8 * MiB)
    with pytest.raises(ImageError, match=f"layer {layer.digest}.*inflates to more than {8 * MiB} bytes"):
        await stream_layer(lambda: io.BytesIO(blob), layer, "gzip", sink, None, "test", limits)
    assert sum(received) <= 8 * MiB + 8 * MiB  # never more than the cap (plus one piece) reached the sink
    assert max(received) <= 8 * MiB


async def test_the_default_cap_lets_a_normal_layer_through() -> None:
    raw = bytes(4 * MiB)
    blob = gzip.compress(raw)
    layer = SourceLayer(
        "sha256:" + hashlib.sha256(blob).hexdigest(),
        "sha256:" + hashlib.sha256(raw).hexdigest(),
        "application/vnd.oci.image.layer.v1.tar+gzip",
        len(blob),
    )
    out = io.BytesIO()

    async def sink(data: bytes) -> None:
        out.write(data)

    await stream_layer(lambda: io.BytesIO(blob), layer, "gzip", sink, None, "test")
    assert out.getvalue() == raw
