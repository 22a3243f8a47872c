"""Hand-written regressions for the SWE-bench-format fixtures (see tests/fixtures/swe/README.md).

Each regression is a small real bug put into a released library: ``old`` is replaced by ``new`` (exactly
one occurrence) in ``file`` to make the broken ``base_commit``; the fix (``patch``) is the reverse. ``test``
is appended to ``test_file`` and becomes the ``test_patch``: it pins the correct behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Project:
    name: str
    version: str  # the PyPI release
    repo: str  # owner/name of the real project
    test_deps: tuple[str, ...]


@dataclass(frozen=True)
class Regression:
    project: str
    number: int
    file: str
    old: str
    new: str
    test_file: str
    test: str
    problem_statement: str


PROJECTS: dict[str, Project] = {
    "toolz": Project("toolz", "1.2.0", "pytoolz/toolz", ("pytest",)),
    "tomlkit": Project("tomlkit", "0.15.2", "python-poetry/tomlkit", ("pytest", "PyYAML")),
    "marshmallow": Project("marshmallow", "4.4.0", "marshmallow-code/marshmallow", ("pytest", "simplejson")),
    "boltons": Project("boltons", "26.2.0", "mahmoud/boltons", ("pytest",)),
    "click": Project("click", "8.5.1", "pallets/click", ("pytest",)),
}

REGRESSIONS: list[Regression] = [
    # ---------------------------------------------------------------- toolz
    Regression(
        "toolz",
        90001,
        "toolz/itertoolz.py",
        "        return tuple(collections.deque(seq, n))",
        "        return tuple(collections.deque(seq, n - 1))",
        "toolz/tests/test_itertoolz.py",
        """

def test_tail_of_iterator():
    assert tail(2, iter([10, 20, 30, 40, 50])) == (40, 50)
    assert tail(3, (x for x in range(5))) == (2, 3, 4)
""",
        """`tail` returns one element too few for iterators

`tail(n, seq)` works for lists, but when `seq` is an iterator or a generator the result is one item short.

```python
>>> from toolz import tail
>>> tail(2, [10, 20, 30, 40, 50])
[40, 50]
>>> tail(2, iter([10, 20, 30, 40, 50]))
(50,)
```

Expected `(40, 50)`: the last `n` elements, whatever kind of iterable is passed.
""",
    ),
    Regression(
        "toolz",
        90002,
        "toolz/itertoolz.py",
        "    return itertools.islice(seq, 0, None, n)",
        "    return itertools.islice(seq, 1, None, n)",
        "toolz/tests/test_itertoolz.py",
        """

def test_take_nth_starts_at_first():
    assert list(take_nth(2, [10, 20, 30, 40, 50])) == [10, 30, 50]
    assert list(take_nth(1, "abc")) == ["a", "b", "c"]
""",
        """`take_nth` skips the first element

The documentation says `take_nth(2, [10, 20, 30, 40, 50])` gives every 2nd item starting with the first one,
`[10, 30, 50]`, but I get:

```python
>>> list(take_nth(2, [10, 20, 30, 40, 50]))
[20, 40]
>>> list(take_nth(1, "abc"))
['b', 'c']
```

`take_nth(1, seq)` should return the whole sequence.
""",
    ),
    Regression(
        "toolz",
        90003,
        "toolz/itertoolz.py",
        "            yield prev[:end]\n",
        "            yield prev[:end - 1]\n",
        "toolz/tests/test_itertoolz.py",
        """

def test_partition_all_keeps_short_tail():
    assert list(partition_all(2, [1, 2, 3, 4, 5])) == [(1, 2), (3, 4), (5,)]
    assert list(partition_all(3, [1, 2, 3, 4, 5])) == [(1, 2, 3), (4, 5)]
""",
        """`partition_all` loses items of the final partition for lists

With a list whose length is not a multiple of `n`, the last tuple comes out one element short (or empty):

```python
>>> list(partition_all(2, [1, 2, 3, 4, 5]))
[(1, 2), (3, 4), ()]
>>> list(partition_all(3, [1, 2, 3, 4, 5]))
[(1, 2, 3), (4,)]
```

Expected `[(1, 2), (3, 4), (5,)]` and `[(1, 2, 3), (4, 5)]`. With a generator input the result is right.
""",
    ),
    Regression(
        "toolz",
        90004,
        "toolz/itertoolz.py",
        "        return len(seq) == len(set(seq))",
        "        return len(seq) >= len(set(seq))",
        "toolz/tests/test_itertoolz.py",
        """

def test_isdistinct_sequences_with_duplicates():
    assert isdistinct([1, 2, 1]) is False
    assert isdistinct("Hello") is False
    assert isdistinct((1, 2, 3)) is True
""",
        """`isdistinct` says True for lists that contain duplicates

```python
>>> from toolz import isdistinct
>>> isdistinct([1, 2, 1])
True
>>> isdistinct("Hello")
True
>>> isdistinct(iter([1, 2, 1]))
False
```

A list or string with a repeated value should give `False`, as the iterator case does.
""",
    ),
    Regression(
        "toolz",
        90005,
        "toolz/dicttoolz.py",
        "    except (KeyError, IndexError, TypeError):\n        if no_default:",
        "    except (KeyError, TypeError):\n        if no_default:",
        "toolz/tests/test_dicttoolz.py",
        """

def test_get_in_index_out_of_range_gives_default():
    from toolz.dicttoolz import get_in

    data = {"a": [1, 2]}
    assert get_in(["a", 5], data) is None
    assert get_in(["a", 5], data, default="x") == "x"
""",
        """`get_in` raises IndexError instead of returning the default

When the path goes through a list and the index is out of range, `get_in` raises instead of returning
`default`:

```python
>>> from toolz import get_in
>>> get_in(["a", 5], {"a": [1, 2]}, default="x")
Traceback (most recent call last):
  ...
IndexError: list index out of range
```

Expected `"x"` (and `None` without a default), as for a missing dict key. `no_default=True` should still
raise.
""",
    ),
    # ---------------------------------------------------------------- tomlkit
    Regression(
        "tomlkit",
        90001,
        "tomlkit/_utils.py",
        '                if sign == "-":',
        '                if sign == "+":',
        "tests/test_utils.py",
        """

def test_parse_rfc3339_negative_offset():
    from datetime import timedelta

    from tomlkit._utils import parse_rfc3339

    dt = parse_rfc3339("1979-05-27T00:32:00-07:00")
    assert dt.utcoffset() == -timedelta(hours=7)
    dt = parse_rfc3339("1979-05-27T00:32:00+05:30")
    assert dt.utcoffset() == timedelta(hours=5, minutes=30)
""",
        """Datetimes with a UTC offset get the wrong sign

Offset date-times are parsed with the sign of their offset flipped:

```python
>>> import tomlkit
>>> doc = tomlkit.parse("dt = 1979-05-27T00:32:00-07:00")
>>> doc["dt"].utcoffset()
datetime.timedelta(seconds=25200)
```

Expected `-7:00` (`timedelta(days=-1, seconds=61200)`); `+05:30` comes out as `-05:30` too.
""",
    ),
    Regression(
        "tomlkit",
        90002,
        "tomlkit/_utils.py",
        '            microsecond = int((f"{m.group(\'fraction\'):<06s}")[:6])\n\n        if m.group("tz"):',
        '            microsecond = int((f"{m.group(\'fraction\'):>06s}")[:6])\n\n        if m.group("tz"):',
        "tests/test_utils.py",
        """

def test_parse_rfc3339_short_fraction():
    from tomlkit._utils import parse_rfc3339

    assert parse_rfc3339("1979-05-27T00:32:00.5").microsecond == 500000
    assert parse_rfc3339("1979-05-27T00:32:00.123Z").microsecond == 123000
""",
        """Fractional seconds of datetimes are read wrongly when shorter than 6 digits

```python
>>> import tomlkit
>>> tomlkit.parse("t = 1979-05-27T00:32:00.5")["t"].microsecond
5
```

`.5` seconds is 500000 microseconds; `.123` gives 123 instead of 123000. Local times (`00:32:00.5`) are
parsed correctly.
""",
    ),
    Regression(
        "tomlkit",
        90003,
        "tomlkit/items.py",
        '                c not in string.ascii_letters + string.digits + "-" + "_" for c in k',
        '                c not in string.ascii_letters + string.digits + "_" for c in k',
        "tests/test_api.py",
        """

def test_dashed_keys_stay_bare():
    assert tomlkit.dumps({"a-b": 1, "c_d": 2}) == "a-b = 1\\nc_d = 2\\n"
""",
        """Keys containing a dash are written quoted

TOML bare keys may contain `A-Za-z0-9_-`, but tomlkit quotes keys with a dash when building documents:

```python
>>> import tomlkit
>>> print(tomlkit.dumps({"a-b": 1}))
"a-b" = 1
```

Expected `a-b = 1`, like other bare keys (underscores are fine).
""",
    ),
    Regression(
        "tomlkit",
        90004,
        "tomlkit/items.py",
        "    def __rsub__(self, other: object) -> Integer:\n        result = int.__rsub__(self, other)",
        "    def __rsub__(self, other: object) -> Integer:\n        result = int.__sub__(self, other)",
        "tests/test_items.py",
        """

def test_integer_reflected_subtraction():
    doc = parse("x = 3")
    assert 10 - doc["x"] == 7
    assert isinstance(10 - doc["x"], int)
""",
        """`other - integer_item` computes `item - other`

```python
>>> import tomlkit
>>> doc = tomlkit.parse("x = 3")
>>> 10 - doc["x"]
-7
>>> 10 - 3
7
```

Subtracting a TOML integer from a plain int gives the negated result; `doc["x"] - 10` is correct.
""",
    ),
    Regression(
        "tomlkit",
        90005,
        "tomlkit/_utils.py",
        "                i += seq_len - 1  # fast-forward escape sequence",
        "                i += seq_len  # fast-forward escape sequence",
        "tests/test_utils.py",
        """

def test_escape_string_consecutive_escapes():
    from tomlkit._utils import escape_string

    assert escape_string("a\\n\\nb") == "a\\\\n\\\\nb"
    assert escape_string('say ""hi""') == 'say \\\\"\\\\"hi\\\\"\\\\"'
""",
        """Strings with two special characters in a row are written invalidly

When a string contains two characters that need escaping next to each other, only the first one is
escaped:

```python
>>> import tomlkit
>>> print(tomlkit.dumps({"s": "a\\n\\nb"}))
s = "a\\n
b"
```

The output is not valid TOML (a raw newline in a basic string). Expected `s = "a\\n\\nb"`. The same happens
with `""` inside a string.
""",
    ),
    # ---------------------------------------------------------------- marshmallow
    Regression(
        "marshmallow",
        90001,
        "src/marshmallow/validate.py",
        "            value > self.max if self.max_inclusive else value >= self.max",
        "            value >= self.max if self.max_inclusive else value > self.max",
        "tests/test_validate.py",
        """

def test_range_max_bound_inclusiveness():
    assert validate.Range(max=10)(10) == 10
    with pytest.raises(ValidationError):
        validate.Range(max=10, max_inclusive=False)(10)
    with pytest.raises(ValidationError):
        validate.Range(max=10)(11)
""",
        """`validate.Range` rejects the maximum although it is inclusive by default

```python
>>> from marshmallow import validate
>>> validate.Range(max=10)(10)
marshmallow.exceptions.ValidationError: ['Must be less than or equal to 10.']
>>> validate.Range(max=10, max_inclusive=False)(10)
10
```

The error message even says "less than or equal to 10". Expected: 10 passes by default, and is rejected
with `max_inclusive=False`.
""",
    ),
    Regression(
        "marshmallow",
        90002,
        "src/marshmallow/validate.py",
        "        if self.max is not None and length > self.max:",
        "        if self.max is not None and length >= self.max:",
        "tests/test_validate.py",
        """

def test_length_max_is_inclusive():
    assert validate.Length(max=3)("abc") == "abc"
    assert validate.Length(min=1, max=2)([1, 2]) == [1, 2]
    with pytest.raises(ValidationError):
        validate.Length(max=3)("abcd")
""",
        """`validate.Length(max=n)` rejects values of length exactly n

```python
>>> from marshmallow import validate
>>> validate.Length(max=3)("abc")
marshmallow.exceptions.ValidationError: ['Longer than maximum length 3.']
```

"abc" is not longer than 3. Expected it to pass; only length 4 and more should fail.
""",
    ),
    Regression(
        "marshmallow",
        90003,
        "src/marshmallow/fields.py",
        '            if math.isnan(num) or num == float("inf") or num == float("-inf"):',
        '            if math.isnan(num) or num == float("inf"):',
        "tests/test_deserialization.py",
        """

def test_float_field_rejects_negative_infinity_by_default():
    field = fields.Float()
    with pytest.raises(ValidationError):
        field.deserialize("-inf")
    with pytest.raises(ValidationError):
        field.deserialize(float("-inf"))
    assert fields.Float(allow_nan=True).deserialize("-inf") == float("-inf")
""",
        """`fields.Float` accepts `-inf` although `allow_nan` is False

```python
>>> from marshmallow import fields
>>> fields.Float().deserialize("inf")
ValidationError: ['Special numeric values (nan or infinity) are not permitted.']
>>> fields.Float().deserialize("-inf")
-inf
```

Negative infinity is a special value too and should be rejected unless `allow_nan=True`.
""",
    ),
    Regression(
        "marshmallow",
        90004,
        "src/marshmallow/utils.py",
        '        head, rest = key.split(".", 1)',
        '        head, rest = key.rsplit(".", 1)',
        "tests/test_utils.py",
        """

def test_set_value_deep_path():
    d = {}
    utils.set_value(d, "a.b.c", 1)
    assert d == {"a": {"b": {"c": 1}}}
""",
        """Loading into a `data_key`/attribute path with more than one dot nests wrongly

`set_value` with a three-level dotted key builds the wrong structure:

```python
>>> from marshmallow import utils
>>> d = {}
>>> utils.set_value(d, "a.b.c", 1)
>>> d
{'a.b': {'c': 1}}
```

Expected `{'a': {'b': {'c': 1}}}`; two-level keys such as `"a.b"` work.
""",
    ),
    Regression(
        "marshmallow",
        90005,
        "src/marshmallow/fields.py",
        "        if self.strict and not isinstance(value, numbers.Integral):",
        "        if self.strict and isinstance(value, float):",
        "tests/test_deserialization.py",
        """

def test_strict_integer_rejects_strings_and_decimals():
    field = fields.Integer(strict=True)
    for value in ("42", decimal.Decimal("42"), 42.0):
        with pytest.raises(ValidationError):
            field.deserialize(value)
    assert field.deserialize(42) == 42
""",
        """`Integer(strict=True)` accepts numeric strings

```python
>>> from marshmallow import fields
>>> fields.Integer(strict=True).deserialize("42")
42
>>> fields.Integer(strict=True).deserialize(42.0)
ValidationError: ['Not a valid integer.']
```

The docs say "If True, only integer types are valid": `"42"` and `Decimal("42")` should be rejected too.
""",
    ),
    # ---------------------------------------------------------------- boltons
    Regression(
        "boltons",
        90001,
        "boltons/mathutils.py",
        "    if upper < lower:",
        "    if upper <= lower:",
        "tests/test_mathutils.py",
        """

def test_clamp_equal_bounds():
    assert clamp(5, lower=3, upper=3) == 3
    assert clamp(1, lower=3, upper=3) == 3
""",
        """`clamp` raises when lower and upper are equal

```python
>>> from boltons.mathutils import clamp
>>> clamp(5, lower=3, upper=3)
ValueError: expected upper bound (3) >= lower bound (3)
```

The message itself says `upper >= lower` is allowed; expected `3`.
""",
    ),
    Regression(
        "boltons",
        90002,
        "boltons/strutils.py",
        "            if numstr[-2] == '1':",
        "            if numstr[-2] == '0':",
        "tests/test_strutils.py",
        """

def test_ordinalize_teens_and_hundreds():
    assert strutils.ordinalize(11) == '11th'
    assert strutils.ordinalize(13) == '13th'
    assert strutils.ordinalize(101) == '101st'
    assert strutils.ordinalize(22) == '22nd'
""",
        """`ordinalize` gets teens and x0y numbers wrong

```python
>>> from boltons.strutils import ordinalize
>>> ordinalize(11), ordinalize(12), ordinalize(101)
('11st', '12nd', '101th')
```

Expected `('11th', '12th', '101st')`. Single digits are fine.
""",
    ),
    Regression(
        "boltons",
        90003,
        "boltons/iterutils.py",
        "            cur_chunk[lc:] = [fill_val] * (size - lc)",
        "            cur_chunk[lc:] = [fill_val] * (size - lc - 1)",
        "tests/test_iterutils.py",
        """

def test_chunked_fill_pads_to_size():
    from boltons.iterutils import chunked

    assert chunked(range(5), 3, fill=None) == [[0, 1, 2], [3, 4, None]]
    assert chunked(range(4), 3, fill=0) == [[0, 1, 2], [3, 0, 0]]
""",
        """`chunked(..., fill=...)` leaves the last chunk one short

```python
>>> from boltons.iterutils import chunked
>>> chunked(range(5), 3, fill=None)
[[0, 1, 2], [3, 4]]
```

With `fill` given, every chunk should have exactly `size` items: expected `[[0, 1, 2], [3, 4, None]]`.
""",
    ),
    Regression(
        "boltons",
        90004,
        "boltons/strutils.py",
        "        if abs_bytes < next_size:",
        "        if abs_bytes <= next_size:",
        "tests/test_strutils.py",
        """

def test_bytes2human_exact_unit_boundaries():
    assert strutils.bytes2human(1024) == '1K'
    assert strutils.bytes2human(1024 ** 2) == '1M'
    assert strutils.bytes2human(1023) == '1023B'
""",
        """`bytes2human(1024)` returns `'1024B'` instead of `'1K'`

Values that are exactly a power of 1024 are shown in the smaller unit:

```python
>>> from boltons.strutils import bytes2human
>>> bytes2human(1024)
'1024B'
>>> bytes2human(1024 ** 2)
'1024K'
```

The docstring example says `bytes2human(1024)` is `'1K'`.
""",
    ),
    Regression(
        "boltons",
        90005,
        "boltons/iterutils.py",
        (
            "        def key_func(x): return getattr(x, key, x)\n    else:\n"
            "        raise TypeError('\"key\" expected a string or callable, not %r' % key)\n    seen = set()"
        ),
        (
            "        def key_func(x): return getattr(x, key, None)\n    else:\n"
            "        raise TypeError('\"key\" expected a string or callable, not %r' % key)\n    seen = set()"
        ),
        "tests/test_iterutils.py",
        """

def test_unique_attr_key_falls_back_to_identity():
    from boltons.iterutils import unique

    class Named:
        def __init__(self, name):
            self.name = name

    a, b = Named('a'), Named('a')
    assert unique([a, b, 1, 2, 2], key='name') == [a, 1, 2]
""",
        """`unique(..., key='attr')` drops items that have no such attribute

The docs say a string key falls back on identity when the attribute is not present, but items without the
attribute are all treated as equal:

```python
>>> from boltons.iterutils import unique
>>> unique([1, 2, 2, 3], key='name')
[1]
```

Expected `[1, 2, 3]`.
""",
    ),
    # ---------------------------------------------------------------- click
    Regression(
        "click",
        90001,
        "src/click/types.py",
        "        return bound + dir\n",
        "        return bound - dir\n",
        "tests/test_types/test_IntRange.py",
        """

def test_clamp_open_int_range():
    import click

    t = click.IntRange(0, 5, min_open=True, max_open=True, clamp=True)
    assert t.convert(-3, None, None) == 1
    assert t.convert(9, None, None) == 4
""",
        """`IntRange` with `clamp=True` and an open bound clamps outside the range

```python
>>> import click
>>> t = click.IntRange(0, 5, min_open=True, clamp=True)
>>> t.convert(-3, None, None)
-1
```

`-1` is not even in the range `0<x<=5`. Expected the nearest valid value, `1` (and `4` for an open upper
bound of 5).
""",
    ),
    Regression(
        "click",
        90002,
        "src/click/types.py",
        '        rop = "<" if self.max_open else "<="',
        '        rop = "<=" if self.max_open else "<"',
        "tests/test_types/test_IntRange.py",
        """

def test_range_description_operators():
    import click

    assert repr(click.IntRange(1, 3)) == "<IntRange 1<=x<=3>"
    assert repr(click.FloatRange(0, 1, max_open=True)) == "<FloatRange 0<=x<1>"
""",
        """Help text shows the wrong operator for the upper bound of a range

```python
>>> import click
>>> click.IntRange(1, 3)
<IntRange 1<=x<3>
>>> click.FloatRange(0, 1, max_open=True)
<FloatRange 0<=x<=1>
```

The same text appears in `--help` (`[1<=x<3]`). A closed range should show `1<=x<=3` and an open upper
bound `x<1`.
""",
    ),
    Regression(
        "click",
        90003,
        "src/click/formatting.py",
        "    rv.sort(key=lambda x: x[0])",
        "    rv.sort(key=lambda x: x[0], reverse=True)",
        "tests/test_formatting.py",
        """

def test_join_options_short_first():
    from click.formatting import join_options

    assert join_options(["--verbose", "-v"]) == ("-v, --verbose", False)
    assert join_options(["/debug", "--debug"]) == ("/debug, --debug", True)
""",
        """`--help` lists long option names before short ones

```python
import click

@click.command()
@click.option("--verbose", "-v", is_flag=True, help="Be chatty.")
def cli(verbose):
    pass
```

`cli --help` shows

```
Options:
  --verbose, -v  Be chatty.
```

Click always listed the shortest prefix first (`-v, --verbose`), whatever order the names are declared in.
""",
    ),
    Regression(
        "click",
        90004,
        "src/click/termui.py",
        "        prompt += f\" ({', '.join(map(str, type.choices))})\"",
        "        prompt += f\" ({'/'.join(map(str, type.choices))})\"",
        "tests/test_utils/test_prompt.py",
        """

def test_prompt_lists_choices_comma_separated():
    from click.termui import _build_prompt

    prompt = _build_prompt("Pick", ": ", type=click.Choice(["a", "b", "c"]))
    assert prompt == "Pick (a, b, c): "
""",
        """Prompt lists choices separated by slashes

```python
>>> import click
>>> click.prompt("Pick", type=click.Choice(["a", "b", "c"]))
Pick (a/b/c):
```

Choices used to be shown as `Pick (a, b, c): `, which is what the docs show; `a/b/c` is also easy to read as
one choice containing slashes.
""",
    ),
    Regression(
        "click",
        90005,
        "src/click/types.py",
        "        return BoolParamType.bool_states.get(value.strip().lower())",
        "        return BoolParamType.bool_states.get(value.lower())",
        "tests/test_types/test_convert_type.py",
        """

def test_bool_strings_with_surrounding_whitespace():
    import click

    assert click.BOOL.convert(" yes ", None, None) is True
    assert click.BOOL.convert("Off\\n", None, None) is False
""",
        """BOOL parameters reject values with surrounding whitespace

```python
>>> import click
>>> click.BOOL.convert(" yes ", None, None)
click.exceptions.BadParameter: ' yes ' is not a valid boolean.
```

Values read from environment variables or files often carry a trailing newline. Expected `True` (and the
docstring of `str_to_bool` says values are stripped).
""",
    ),
]
