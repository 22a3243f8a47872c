"""Each mutation operator on small real-looking code: exact outputs, comments and spacing untouched."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from mutate_helpers import afters, mutants

from ares.factory.mutate import STRATEGIES, candidates


def _d(text: str) -> str:
    return textwrap.dedent(text)


def test_flip_comparison_each_operator_of_a_chain_and_keeps_spacing(tmp_path: Path) -> None:
    source = """\
    def within(x, lo, hi):
        return lo <= x  <  hi  # inclusive lower bound
    """
    assert afters(tmp_path, source, "flip_comparison") == [
        _d("""\
        def within(x, lo, hi):
            return lo < x  <  hi  # inclusive lower bound
        """),
        _d("""\
        def within(x, lo, hi):
            return lo <= x  <=  hi  # inclusive lower bound
        """),
    ]


def test_flip_comparison_identity_and_membership(tmp_path: Path) -> None:
    source = """\
    def lookup(table, key):
        if key not in table and table is not None:
            return None
        return table[key]
    """
    got = afters(tmp_path, source, "flip_comparison")
    assert [line for after in got for line in after.splitlines() if line.startswith("    if")] == [
        "    if key in table and table is not None:",
        "    if key not in table and table is None:",
    ]


def test_flip_comparison_leaves_strings_alone(tmp_path: Path) -> None:
    source = """\
    def is_yes(answer):
        return answer == "y <= n"
    """
    assert afters(tmp_path, source, "flip_comparison") == [
        _d("""\
        def is_yes(answer):
            return answer != "y <= n"
        """)
    ]


def test_flip_boolean(tmp_path: Path) -> None:
    source = """\
    def ready(job):
        return job.done and not job.failed
    """
    assert afters(tmp_path, source, "flip_boolean") == [
        _d("""\
        def ready(job):
            return job.done or not job.failed
        """)
    ]


def test_swap_arithmetic_outer_then_inner_and_augmented(tmp_path: Path) -> None:
    source = """\
    def total(price, qty, tax, label):
        amount = price*qty + tax
        label += "!"
        amount //= 2
        return amount, "x" + label
    """
    assert afters(tmp_path, source, "swap_arithmetic") == [
        _d("""\
        def total(price, qty, tax, label):
            amount = price*qty - tax
            label += "!"
            amount //= 2
            return amount, "x" + label
        """),
        _d("""\
        def total(price, qty, tax, label):
            amount = price/qty + tax
            label += "!"
            amount //= 2
            return amount, "x" + label
        """),
        _d("""\
        def total(price, qty, tax, label):
            amount = price*qty + tax
            label += "!"
            amount /= 2
            return amount, "x" + label
        """),
    ]


def test_off_by_one_on_range_index_and_slice(tmp_path: Path) -> None:
    source = """\
    def window(items, n):
        for i in range(n):
            yield items[i], items[-1], items[1:n]
    """
    got = [after.splitlines()[1:3] for after in afters(tmp_path, source, "off_by_one")]
    loop, body = "    for i in range(n):", "        yield items[i], items[-1], items[1:n]"
    assert got == [
        ["    for i in range(n - 1):", body],
        ["    for i in range(n + 1):", body],
        [loop, "        yield items[i - 1], items[-1], items[1:n]"],
        [loop, "        yield items[i + 1], items[-1], items[1:n]"],
        [loop, "        yield items[i], items[-2], items[1:n]"],
        [loop, "        yield items[i], items[-1], items[0:n]"],
        [loop, "        yield items[i], items[-1], items[2:n]"],
        [loop, "        yield items[i], items[-1], items[1:n - 1]"],
        [loop, "        yield items[i], items[-1], items[1:n + 1]"],
    ]


def test_off_by_one_moves_an_existing_offset_and_parenthesizes(tmp_path: Path) -> None:
    source = """\
    def tail(seq, k, flag):
        a = seq[k + 1]
        return list(range(1, a | k))
    """
    got = [after.splitlines()[1:3] for after in afters(tmp_path, source, "off_by_one")]
    assert [line for pair in got for line in pair] == [
        "    a = seq[k]",
        "    return list(range(1, a | k))",
        "    a = seq[k + 2]",
        "    return list(range(1, a | k))",
        "    a = seq[k + 1]",
        "    return list(range(0, a | k))",
        "    a = seq[k + 1]",
        "    return list(range(2, a | k))",
        "    a = seq[k + 1]",
        "    return list(range(1, (a | k) - 1))",
        "    a = seq[k + 1]",
        "    return list(range(1, (a | k) + 1))",
    ]


def test_off_by_one_skips_type_subscripts(tmp_path: Path) -> None:
    source = """\
    def names(rows: list[int]) -> dict[str, int]:
        return cast(Dict[str, T], dict[K, V](rows))
    """
    assert afters(tmp_path, source, "off_by_one") == []


def test_change_constant_in_the_body_only(tmp_path: Path) -> None:
    source = """\
    LIMIT = 10


    def connect(retries=5, stacklevel=2):
        attempts = 3  # tries
        warn("slow", stacklevel=2)
        return attempts, True, "7"
    """
    got = afters(tmp_path, source, "change_constant")
    changed = [[line for line in after.splitlines() if line not in _d(source).splitlines()] for after in got]
    assert changed == [
        ["    attempts = 2  # tries"],
        ["    attempts = 4  # tries"],
        ['    return attempts, False, "7"'],
    ]


def test_invert_condition(tmp_path: Path) -> None:
    source = """\
    def route(req, ready):
        if not ready:
            return None
        elif req.a and req.b:
            return 1
        if(req.c):
            return 2
    """
    got = afters(tmp_path, source, "invert_condition")
    changed = [[line for line in after.splitlines() if line not in _d(source).splitlines()] for after in got]
    assert changed == [["    if ready:"], ["    elif not (req.a and req.b):"], ["    if not (req.c):"]]


def test_drop_condition_drops_exactly_one_clause(tmp_path: Path) -> None:
    source = """\
    def pick(a, b, c):
        if a and b and c:  # all three
            return 1
        return a or b
    """
    got = [after.splitlines()[1] for after in afters(tmp_path, source, "drop_condition")]
    assert got == [
        "    if a and b:  # all three",
        "    if a and c:  # all three",
        "    if b and c:  # all three",
    ]


def test_drop_condition_on_a_multiline_test(tmp_path: Path) -> None:
    source = """\
    def ok(f):
        if (
            hasattr(f, "a")
            and hasattr(f, "b")
        ):
            return True
    """
    assert afters(tmp_path, source, "drop_condition") == [
        _d("""\
        def ok(f):
            if (
                hasattr(f, "a")
            ):
                return True
        """),
        _d("""\
        def ok(f):
            if (
                hasattr(f, "b")
            ):
                return True
        """),
    ]


def test_remove_statement_keeps_comments_and_never_the_last(tmp_path: Path) -> None:
    source = '''\
    def save(self, path):
        """Write the record."""
        self.validate()
        # serialize first
        data = self.dump()
        write(path, data)
    '''
    assert afters(tmp_path, source, "remove_statement") == [
        _d('''\
        def save(self, path):
            """Write the record."""
            # serialize first
            data = self.dump()
            write(path, data)
        '''),
        _d('''\
        def save(self, path):
            """Write the record."""
            self.validate()
            # serialize first
            write(path, data)
        '''),
    ]


def test_remove_return_only_early_returns(tmp_path: Path) -> None:
    source = """\
    def find(items, key):
        for item in items:
            if item.key == key:
                return item  # found
            if item.stop:
                log(item)
                return None
            if item.skip: return None
        return None
    """
    assert afters(tmp_path, source, "remove_return") == [
        _d("""\
        def find(items, key):
            for item in items:
                if item.key == key:
                    pass  # found
                if item.stop:
                    log(item)
                    return None
                if item.skip: return None
            return None
        """),
        _d("""\
        def find(items, key):
            for item in items:
                if item.key == key:
                    return item  # found
                if item.stop:
                    log(item)
                if item.skip: return None
            return None
        """),
        _d("""\
        def find(items, key):
            for item in items:
                if item.key == key:
                    return item  # found
                if item.stop:
                    log(item)
                    return None
                if item.skip: pass
            return None
        """),
    ]


def test_remove_handler_drops_one_of_several_or_reraises_a_lone_one(tmp_path: Path) -> None:
    source = """\
    def load(path):
        try:
            return read(path)
        except KeyError:
            return None
        except OSError as exc:  # missing file
            raise LoadError(path) from exc


    def parse(text):
        try:
            return int(text)
        except ValueError:
            return 0
    """
    got = afters(tmp_path, source, "remove_handler")
    assert len(got) == 3
    assert "except KeyError" not in got[0] and "except OSError as exc:  # missing file" in got[0]
    assert "except KeyError:\n        return None\n" in got[1] and "except OSError" not in got[1]
    assert got[2].endswith("    try:\n        return int(text)\n    except ValueError:\n        raise\n")


def test_swap_arguments_adjacent_positional_only(tmp_path: Path) -> None:
    source = """\
    def f(base, exp, key):
        a = pow(base,  exp)
        b = max(base, exp)
        c = g(key, key, sep=base)
        return h(base, exp, *key)
    """
    got = [
        [line for line in after.splitlines()[1:] if line not in _d(source)]
        for after in afters(tmp_path, source, "swap_arguments")
    ]
    assert got == [["    a = pow(exp,  base)"], ["    return h(exp, base, *key)"]]


def test_swap_if_else_keeps_header_comments(tmp_path: Path) -> None:
    source = """\
    def speed(flag):
        if flag:  # fast path
            x = 1
        else:  # slow path
            x = 2
            x += 1
        return x
    """
    assert afters(tmp_path, source, "swap_if_else") == [
        _d("""\
        def speed(flag):
            if flag:  # fast path
                x = 2
                x += 1
            else:  # slow path
                x = 1
            return x
        """)
    ]


def test_shuffle_skips_pairs_that_commute(tmp_path: Path) -> None:
    source = """\
    def fill(out):
        a = 1
        b = 2
        out.append(a)
        out.append(b)
    """
    assert afters(tmp_path, source, "shuffle") == [
        _d("""\
        def fill(out):
            a = 1
            out.append(a)
            b = 2
            out.append(b)
        """),
        _d("""\
        def fill(out):
            a = 1
            b = 2
            out.append(b)
            out.append(a)
        """),
    ]


def test_only_function_bodies_with_qualnames_and_lines(tmp_path: Path) -> None:
    source = """\
    THRESHOLD = 1 < 2


    class Box:
        flag = 3 > 4

        def check(self, x):
            def inner(y):
                return y != 0
            return x == 1
    """
    got = mutants(tmp_path, source, "flip_comparison")
    assert [(m.qualname, m.line, m.description) for m in got] == [
        ("Box.check.<locals>.inner", 9, "flip comparison '!=' to '=='"),
        ("Box.check", 10, "flip comparison '==' to '!='"),
    ]
    assert {m.path for m in got} == {"pkg/mod.py"} and all(m.strategy == "flip_comparison" for m in got)


def test_every_strategy_has_a_stable_name() -> None:
    assert STRATEGIES == (
        "flip_comparison",
        "flip_boolean",
        "swap_arithmetic",
        "off_by_one",
        "change_constant",
        "invert_condition",
        "drop_condition",
        "remove_statement",
        "remove_return",
        "remove_handler",
        "swap_arguments",
        "swap_if_else",
        "shuffle",
    )


def test_bad_arguments_are_clear_errors(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    with pytest.raises(ValueError, match="unknown mutation strategy flip_everything"):
        list(candidates(tmp_path, ["pkg"], strategies=["flip_everything"]))
    with pytest.raises(ValueError, match="package directory not found"):
        list(candidates(tmp_path, ["src/nothing"]))
    with pytest.raises(ValueError, match="limit_per_function"):
        list(candidates(tmp_path, ["pkg"], limit_per_function=0))
