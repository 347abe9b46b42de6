"""tritonkit._records: dataclasses written as JSON records by their fields, and read back."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest

from tritonkit._records import JsonRecord, from_record, to_record


@dataclass(frozen=True)
class _Inner(JsonRecord):
    count: int
    avg_us: float

    _record_keys = {"avg_us": "avg"}


@dataclass(frozen=True)
class _Outer(JsonRecord):
    name: str
    inner: _Inner | None
    parts: tuple[_Inner, ...] = ()
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    limit: float | None = None
    note: str = ""

    _record_defaults = {"inner": None}


def _outer() -> _Outer:
    return _Outer(
        name="x",
        inner=_Inner(count=2, avg_us=1.5),
        parts=(_Inner(count=1, avg_us=0.5),),
        shapes={"t": (1, 3)},
        limit=2.0,
    )


def test_to_record_writes_fields_in_order_with_nested_records_as_dicts_and_tuples_as_lists() -> None:
    assert list(_outer().to_dict().items()) == [
        ("name", "x"),
        ("inner", {"count": 2, "avg": 1.5}),
        ("parts", [{"count": 1, "avg": 0.5}]),
        ("shapes", {"t": [1, 3]}),
        ("limit", 2.0),
        ("note", ""),
    ]


def test_to_record_renames_skips_and_places_derived_values_after_their_field() -> None:
    record = to_record(_outer(), keys={"note": "comment"}, skip=("parts", "shapes"), after={"name": {"n": 1}})
    assert list(record) == ["name", "n", "inner", "limit", "comment"]


def test_from_record_reads_back_what_to_record_wrote_through_json() -> None:
    outer = _outer()
    assert _Outer.from_dict(json.loads(json.dumps(outer.to_dict()))) == outer


def test_from_record_takes_field_defaults_and_none_for_optional_when_keys_are_missing() -> None:
    assert _Outer.from_dict({"name": "y"}) == _Outer(name="y", inner=None)


def test_from_record_reads_an_empty_optional_record_as_none() -> None:
    assert _Outer.from_dict({"name": "y", "inner": {}}).inner is None


def test_from_record_converts_scalars_to_the_field_types() -> None:
    inner = _Inner.from_dict({"count": 3.0, "avg": "2"})
    assert (type(inner.count), type(inner.avg_us)) == (int, float)


def test_from_record_raises_key_error_when_a_required_key_is_missing() -> None:
    with pytest.raises(KeyError, match="count"):
        _Inner.from_dict({"avg": 1.0})


def test_from_record_uses_given_defaults_and_values_before_reading() -> None:
    inner = from_record(_Inner, {}, defaults={"avg_us": 0.0}, values={"count": 7})
    assert inner == _Inner(count=7, avg_us=0.0)
