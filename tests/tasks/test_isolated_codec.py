"""The plain-data codec of ares.tasks.isolated: exact round trips, and strict rejection of anything else.

The decoder runs in the trusted checker on bytes from the candidate process, so every malformed,
non-canonical, oversized or too-deep input must end in CodecError, never in a surprising value.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ares.tasks import isolated
from ares.tasks.isolated import CodecError, decode, encode

floats = st.floats(allow_nan=True, allow_infinity=True)
texts = st.text(st.characters(exclude_categories=()), max_size=20)  # includes lone surrogates
scalars = (
    st.none() | st.booleans() | st.integers() | st.integers(0, 2**64).map(lambda n: n + 10**4000) | floats
)
scalars |= texts | st.binary(max_size=20)
hashables = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | texts | st.binary(max_size=8),
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
    max_leaves=8,
)
plain = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(hashables, inner, max_size=4)
        | st.sets(hashables, max_size=4)
        | st.frozensets(hashables, max_size=4)
    ),
    max_leaves=25,
)


def canon(value: object) -> str:
    """A text that differs whenever two values differ in type or content at any level (nan equals
    nan, 0.0 differs from -0.0, a set's order does not matter)."""
    kind = type(value).__name__
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        return f"int {value:x}"  # repr() of a huge int would hit the digit limit
    if isinstance(value, float):
        return f"float {value.hex()}"
    if isinstance(value, set | frozenset):
        return f"{kind}{{{','.join(sorted(map(canon, value)))}}}"
    if isinstance(value, list | tuple):
        return f"{kind}[{','.join(map(canon, value))}]"
    if isinstance(value, dict):
        return f"dict{{{','.join(f'{canon(k)}:{canon(v)}' for k, v in value.items())}}}"
    return f"{kind} {value!r}"


def same(a: object, b: object) -> bool:
    return canon(a) == canon(b)


@settings(max_examples=300, deadline=None)
@given(plain)
def test_round_trip_is_exact(value: object) -> None:
    back = decode(encode(value))
    assert same(value, back)


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -1,
        2**64,
        pytest.param(-(10**5000), id="past-the-int-str-digit-limit"),  # ints travel as hex
        0.1,
        -0.0,
        math.inf,
        -math.inf,
        5e-324,
        "",
        "a\udc80b",
        "日本",
        b"\x00\xff",
        [],
        (),
        (1,),
        {},
        set(),
        frozenset(),
        {(1, "a"): [None, {2.5}], "k": frozenset({b"x"})},
    ],
)
def test_round_trip_examples(value: object) -> None:
    assert same(decode(encode(value)), value)


def test_nan_round_trips() -> None:
    assert math.isnan(decode(encode(math.nan)))  # type: ignore[arg-type]


def test_bool_and_int_and_float_keep_their_types() -> None:
    assert [type(x) for x in decode(encode([True, 1, 1.0]))] == [bool, int, float]  # type: ignore[attr-defined]


class Always:
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__


class SneakyInt(int):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = int.__hash__


class SneakyList(list):  # type: ignore[type-arg]
    pass


def _nested(depth: int) -> list[object]:
    value: list[object] = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    "value",
    [Always(), SneakyInt(1), SneakyList(), [1, Always()], {"k": SneakyInt(2)}, object(), 1j, bytearray()],
)
def test_encoder_refuses_anything_but_exact_builtin_types(value: object) -> None:
    with pytest.raises(CodecError, match="not plain data"):
        encode(value)


def test_encoder_refuses_deep_and_self_referencing_values() -> None:
    encode(_nested(isolated.MAX_DEPTH))
    with pytest.raises(CodecError, match="deeper"):
        encode(_nested(isolated.MAX_DEPTH + 1))
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(CodecError, match="deeper"):
        encode(loop)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"", "truncated"),
        (b"x", "bad tag"),
        (b"nn", "trailing"),
        (b"i", "bad tag"),
        (b"i1", "bad tag"),
        (b"i01:1", "bad tag"),  # length with a leading zero
        (b"i-1:1", "bad tag"),
        (b"i12345678901:1", "bad tag"),  # length field too long
        (b"i2:1", "runs past"),
        (b"i0:", "malformed int"),
        (b"i2:01", "malformed int"),
        (b"i1:A", "malformed int"),  # hex must be lower case
        (b"i2:+1", "malformed int"),
        (b"i3:0x1", "malformed int"),
        (b"i3:1_0", "malformed int"),
        (b"i2:-0", "malformed int"),
        (b"i2: 1", "malformed int"),
        (b"d3:1.0", "malformed float"),
        (b"d3:NaN", "malformed float"),
        (b"d7:0x1p+00", "malformed float"),
        (b"d2:\xff\xff", "malformed float"),
        (b"s1:\xff", "malformed str"),
        (b"s2:\xc0\x80", "malformed str"),  # overlong UTF-8
        (b"l2:n", "runs past"),
        (b"m1:n", "truncated"),
        (b"l999:", "runs past"),  # a count larger than the input cannot allocate anything
        (b"q0:", "unknown tag"),
        (b"m1:l0:n", "unhashable dict key"),
        (b"m2:s1:an" + b"s1:an", "duplicate dict key"),
        (b"e2:i1:1i1:1", "duplicate set member"),
        (b"e1:l0:", "unhashable set member"),
        (b"e2:i1:1t", "duplicate set member"),  # 1 == True
    ],
)
def test_decoder_rejects_malformed_input(data: bytes, why: str) -> None:
    with pytest.raises(CodecError, match=why):
        decode(data)


def test_decoder_rejects_deep_nesting_without_recursing_forever() -> None:
    ok = b"l1:" * (isolated.MAX_DEPTH - 1) + b"l0:"
    assert decode(ok) == _nested(isolated.MAX_DEPTH)
    with pytest.raises(CodecError, match="deeper"):
        decode(b"l1:" * isolated.MAX_DEPTH + b"l0:")
    with pytest.raises(CodecError):
        decode(b"l1:" * 100_000)


def test_decoder_rejects_oversized_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isolated, "MAX_FRAME", 100)
    decode(b"s90:" + b"a" * 90)
    with pytest.raises(CodecError, match="limit"):
        decode(b"s200:" + b"a" * 200)


@pytest.mark.parametrize("data", ["n", bytearray(b"n"), memoryview(b"n"), None])
def test_decoder_takes_only_bytes(data: object) -> None:
    with pytest.raises(CodecError, match="expected bytes"):
        decode(data)  # type: ignore[arg-type]


def test_decoded_values_are_exact_builtin_types() -> None:
    value = decode(encode({"a": [1, (2.0, b"x")], "b": {3}, "c": frozenset({"d"})}))
    assert type(value) is dict
    assert type(value["a"]) is list and type(value["a"][1]) is tuple  # type: ignore[index]
    assert type(value["b"]) is set and type(value["c"]) is frozenset  # type: ignore[index]
