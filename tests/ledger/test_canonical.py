"""ledger.canonical writes RFC 8785 text itself for speed: it must be the rfc8785 library's text,
byte for byte, and fail where the library fails, or the hashes of stored events would change."""
import enum
import json
import math
import random
import struct
from collections import OrderedDict
from pathlib import Path

import pytest
import rfc8785

from ledger.canonical import canonical_json

ROOT = Path(__file__).resolve().parents[2]


def library(value) -> str:
    return rfc8785.dumps(value).decode("utf-8")


def test_every_record_of_the_shipped_exports_is_written_as_the_library_writes_it():
    """Real events: 3,400 records with 165k floats (20k in exponent form), control characters,
    quotes and non-ASCII text (the export test checks their hashes; this compares the text)."""
    paths = sorted(ROOT.glob("fixtures/ledgers/*.jsonl")) + sorted(ROOT.glob("docs/benchmarks/*.jsonl"))
    records = [json.loads(line) for path in paths for line in path.read_text().splitlines()]
    assert len(records) > 3000
    assert [canonical_json(record) for record in records] == [library(record) for record in records]


def _floats() -> list[float]:
    rng = random.Random(8785)
    edges = [0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 0.1, 0.2 + 0.1,
             1 / 3, 2.0**53, 2.0**53 + 2, 9007199254740993.0, 123456789012345680000.0, 4.35, 0.000001, 1e-7]
    powers = [sign * mantissa * 10.0**exponent for exponent in range(-30, 31)
              for mantissa in (1, 1.5, 9.999999999999999) for sign in (1, -1)]
    bits = [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(4000)]
    scaled = [rng.uniform(-1, 1) * 10.0 ** rng.randint(-9, 22) for _ in range(4000)]
    return [x for x in edges + powers + bits + scaled if math.isfinite(x)]


def test_floats_are_written_as_the_library_writes_them():
    floats = _floats()
    assert [canonical_json(x) for x in floats] == [library(x) for x in floats]
    assert canonical_json({"samples": floats}) == library({"samples": floats})


def test_every_code_point_is_escaped_or_kept_as_the_library_does():
    text = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    assert canonical_json(text) == library(text)
    for c in range(0x80):  # each ASCII character alone, controls, quote and backslash included
        assert canonical_json(chr(c)) == library(chr(c))


def test_keys_are_ordered_by_utf_16_code_units_as_the_library_orders_them():
    # U+E000 comes before U+1F600 by code point but after it in UTF-16 (D83D DE00)
    keys = ["b", "a", "", "A", "é", "\ue000", "\U0001f600", "\uffff", "aa", "a\x00", "\x7f", "z\U00010000"]
    value = {key: [n, {key: n}] for n, key in enumerate(keys)}
    assert canonical_json(value) == library(value)


def test_scalars_containers_and_subclasses_are_written_as_the_library_writes_them():
    class Level(enum.IntEnum):
        HIGH = 3

    class Colour(str, enum.Enum):
        RED = "red"

    class Ratio(float):
        pass

    values = [None, True, False, 0, -1, 2**53 - 1, -(2**53 - 1), "", [], {}, (), [[]], {"a": {}}, (1, "x", None),
              Level.HIGH, Colour.RED, Ratio(2.5), OrderedDict([("b", 1), ("a", 2)]), {"k": (True, False, 1.0)}]
    for value in values:
        assert canonical_json(value) == library(value), value


@pytest.mark.parametrize("value", [2**53, -(2**53), float("nan"), float("inf"), -float("inf"), {1: "a"},
                                   {"a": object()}, "\ud800", {"\udfff": 1}, [{"x": "ok\ud83d"}], {b"k": 1}, b"bytes"])
def test_values_the_library_refuses_are_refused_with_its_error(value):
    with pytest.raises(Exception) as expected:
        library(value)
    with pytest.raises(type(expected.value)):
        canonical_json(value)
