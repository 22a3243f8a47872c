"""Shape checks and the lossless residual/merge machinery shared by the wire-format converters.

Every dialect module parses a wire object into neutral fields, renders those fields back the
canonical way, and keeps in ``extra`` only the wire keys the canonical rendering would not
reproduce (``residual``); rendering puts them back unless they have gone stale (``merge``).
Private to ``ares.llm``: the dialect modules are the public face.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar, cast

Json = dict[str, Any]
T = TypeVar("T")
Parsers = Mapping[str, Callable[[Any], Any]]

#: ARES extension keys every dialect shares (documented in each dialect module).
PROMPT_TOKEN_IDS_KEY = "ares_prompt_token_ids"
METADATA_KEY = "ares_metadata"
COST_KEY = "ares_cost"


class Bad(Exception):
    """A wire value has the wrong shape; the message names the offending path."""


def strip_extensions(body: Mapping[str, Any]) -> Json:
    """The body without top-level ARES extension keys, which strict providers reject."""
    return {k: v for k, v in body.items() if not k.startswith("ares_")}


# --- shape checks -----------------------------------------------------------------------------

# fmt: off
_KINDS: Mapping[str, tuple[type, ...]] = {
    "a boolean": (bool,), "a string": (str,), "an integer": (int,), "a number": (int, float),
    "an array": (list, tuple), "an object": (Mapping,),
}
# fmt: on


def _kind(v: object) -> str:
    return "null" if v is None else next((n for n, t in _KINDS.items() if isinstance(v, t)), type(v).__name__)


def check(v: object, where: str = "value", what: str = "a string", *, null: bool = False) -> Any:
    """``v`` if it is JSON ``what`` (or null when allowed); booleans are not numbers here."""
    if (v is None and null) or (isinstance(v, _KINDS[what]) and (what == "a boolean") == isinstance(v, bool)):
        return v
    raise Bad(f"{where} must be {what}{' or null' if null else ''}, got {_kind(v)}")


def obj(v: object, where: str) -> Mapping[str, Any]:
    return cast(Mapping[str, Any], check(v, where, "an object"))


def seq(v: object, where: str) -> Sequence[Any]:
    return cast(Sequence[Any], check(v, where, "an array"))


opt_str = partial(check, what="a string", null=True)
opt_int = partial(check, what="an integer", null=True)
opt_num = partial(check, what="a number", null=True)


def member(v: object, where: str, allowed: frozenset[str]) -> str:
    """``v`` if it is one of ``allowed`` (a role...)."""
    if v not in allowed:
        raise Bad(f"{where} must be one of {sorted(allowed)}, got {v!r}")
    return cast(str, v)


def opt_id(v: object, where: str = "id") -> str | None:
    """An id or model name; ``""`` (how a missing one is written) reads as None."""
    return opt_str(v, where) or None


def flag(v: object, where: str = "value") -> bool:
    return bool(check(v, where, "a boolean", null=True))


def _opt_array(what: str, v: object, where: str = "value") -> tuple[Any, ...] | None:
    if v is None:
        return None
    return tuple(check(x, f"{where}[{i}]", what) for i, x in enumerate(seq(v, where)))


opt_ints = cast(Callable[..., tuple[int, ...] | None], partial(_opt_array, "an integer"))
opt_nums = cast(Callable[..., tuple[float, ...] | None], partial(_opt_array, "a number"))
opt_strs = cast(Callable[..., tuple[str, ...] | None], partial(_opt_array, "a string"))


def objects(v: object, where: str) -> tuple[Json, ...]:
    """An array of objects, each copied."""
    return tuple(dict(obj(x, f"{where}[{i}]")) for i, x in enumerate(seq(v, where)))


def each(read: Callable[[Json, str], T], v: object, where: str) -> tuple[T, ...]:
    """``read`` applied to each object of an optional array (a copy), with the object's path."""
    return tuple(read(x, f"{where}[{i}]") for i, x in enumerate(() if v is None else objects(v, where)))


def listed(v: Sequence[Any] | None) -> list[Any] | None:
    return None if v is None else list(v)


def some(fields: Json) -> Json:
    """``fields`` without the None values: defaults are left off the wire."""
    return {k: v for k, v in fields.items() if v is not None}


def own(extra: Mapping[str, Any], reserved: frozenset[str]) -> Json:
    """The wire keys of ``extra``: everything but the converter's own bookkeeping keys."""
    return {k: v for k, v in extra.items() if k not in reserved}


# --- the lossless machinery -------------------------------------------------------------------


def residual(original: Mapping[str, Any], rendered: Mapping[str, Any], skip: str = "") -> Json:
    """Keys of ``original`` that rendering the parsed fields would not reproduce."""
    return {k: v for k, v in original.items() if k != skip and (k not in rendered or rendered[k] != v)}


def merge(extra: Mapping[str, Any], rendered: Json, parsers: Parsers) -> Json:
    """``rendered`` over ``extra``, except where ``extra`` spells the same value its own way.

    ``parsers`` reads each modelled key, to tell a re-spelling kept in ``extra`` from a stale
    value. Keys without a parser are wire defaults (``index: 0``...): an ``extra`` value always wins.
    """
    out = {}
    for key, value in rendered.items():
        parse = parsers.get(key)
        keep = key in extra and (parse is None or _parses_equal(parse, extra[key], value))
        out[key] = extra[key] if keep else value
    out.update((k, v) for k, v in extra.items() if k not in out)
    return out


def _parses_equal(parse: Callable[[Any], Any], wire: object, rendered: object) -> bool:
    try:
        return bool(parse(wire) == parse(rendered))
    except Bad:
        return False


# --- shapes more than one dialect reads (the fields all read alike: codec_core) ---------------


def opt_obj(v: object, where: str = METADATA_KEY) -> Mapping[str, Any]:
    """An optional object, read as ``{}`` when absent (``ares_metadata``...)."""
    return {} if v is None else dict(obj(v, where))


def typed_tool(t: Json, where: str) -> Json:
    """A wire tool ``{"type": T, **rest}`` in the Chat shape ``{"type": T, T: rest}``."""
    kind = check(t.pop("type", None), f"{where}.type", "a string")
    if kind == "type":
        raise Bad(f"{where}.type must not be 'type'")
    return {"type": kind, kind: t}


def typed_tool_wire(t: Mapping[str, Any]) -> Json | None:
    """The inverse of ``typed_tool``; None if ``t`` does not have that shape."""
    kind = t.get("type")
    body = t.get(kind) if isinstance(kind, str) and kind != "type" and set(t) == {"type", kind} else None
    return {"type": kind, **body} if isinstance(body, Mapping) and "type" not in body else None
