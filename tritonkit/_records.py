"""Frozen dataclasses as JSON records and back, by their fields.

The result types (perf steps, stream summaries, tune outcomes, validator problems, ...) each
wrote the same two bodies by hand: "every field as a JSON value, nested records as their dicts"
and "every field read back with its type". These two functions write them once from
``dataclasses.fields`` and the field types; each type says only where its record differs (a key
named otherwise, a field left out, a derived value, a default for files written before a field
existed). :class:`JsonRecord` gives a dataclass both as ``to_dict`` / ``from_dict``.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Collection, Mapping
from dataclasses import MISSING, fields
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

if TYPE_CHECKING:
    from _typeshed import DataclassInstance
    from typing_extensions import Self

__all__ = ["JsonRecord", "from_record", "to_record"]

_T = TypeVar("_T", bound="DataclassInstance")


def _json_value(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    if isinstance(value, Mapping):
        return {k: _json_value(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_json_value(v) for v in value]
    return value


def to_record(
    obj: DataclassInstance,
    *,
    keys: Mapping[str, str] | None = None,
    skip: Collection[str] = (),
    after: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """``obj``'s fields in their order as a JSON-ready dict.

    ``keys``: field -> the key it is written under (default: its name); ``skip``: fields left
    out; ``after``: field -> entries (derived values) written right after it. Nested records
    become their ``to_dict()``, tuples lists, mappings plain dicts.
    """
    record: dict[str, Any] = {}
    for f in fields(obj):
        if f.name not in skip:
            record[(keys or {}).get(f.name, f.name)] = _json_value(getattr(obj, f.name))
        record.update((after or {}).get(f.name, {}))
    return record


@functools.cache
def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _typed(tp: Any, value: Any) -> Any:
    """``value`` (read from JSON) as type ``tp``: scalars converted, records read by their
    ``from_dict``, tuples and mappings element by element; an optional record that is empty
    or null is None."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (types.UnionType, typing.Union) and type(None) in args:
        inner = next(a for a in args if a is not type(None))
        if value is None or (not value and hasattr(inner, "from_dict")):
            return None
        return _typed(inner, value)
    if tp in (int, float, str, bool):
        return tp(value)
    if hasattr(tp, "from_dict"):
        return tp.from_dict(value)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return tuple(_typed(args[0], v) for v in value or ())
    if origin in (dict, Mapping):
        return {_typed(args[0], k): _typed(args[1], v) for k, v in dict(value or {}).items()}
    return value


def from_record(
    cls: type[_T],
    data: Mapping[str, Any],
    *,
    keys: Mapping[str, str] | None = None,
    defaults: Mapping[str, Any] | None = None,
    values: Mapping[str, Any] | None = None,
) -> _T:
    """An instance of the dataclass ``cls`` read from ``data`` (as :func:`to_record` wrote it).

    A field missing from ``data`` takes ``defaults[field]``, else the field's own default, else
    None when it is optional; otherwise ``data[key]`` raises KeyError. ``values``: fields
    given as they are (derived from other keys), not read.
    """
    hints = _field_types(cls)
    given = dict(values or {})
    for f in fields(cls):
        if f.name in given or not f.init:
            continue
        key = (keys or {}).get(f.name, f.name)
        if key in data:
            given[f.name] = _typed(hints[f.name], data[key])
        elif defaults and f.name in defaults:
            given[f.name] = defaults[f.name]
        elif f.default is not MISSING:
            given[f.name] = f.default
        elif f.default_factory is not MISSING:
            given[f.name] = f.default_factory()
        elif type(None) in typing.get_args(hints[f.name]):
            given[f.name] = None
        else:
            given[f.name] = _typed(hints[f.name], data[key])  # raises KeyError: a required key
    return cls(**given)


class JsonRecord:
    """Base of a dataclass written as a JSON record by its fields.

    ``_record_keys``: field -> the key it is written under where that differs;
    ``_record_defaults``: field -> the value a record without its key reads as (records written
    before the field existed). A type whose record has more overrides a method.
    """

    _record_keys: ClassVar[Mapping[str, str]] = {}
    _record_defaults: ClassVar[Mapping[str, Any]] = {}

    def to_dict(self) -> dict[str, Any]:
        return to_record(cast("DataclassInstance", self), keys=self._record_keys)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        record_type = cast("type[DataclassInstance]", cls)
        read = from_record(record_type, data, keys=cls._record_keys, defaults=cls._record_defaults)
        return cast("Self", read)
