"""The axes of a comparison, and :class:`Conditions`: the one value saying what a comparison ran under.

A comparison of plain decoding against SD runs *under conditions*: a draft length γ, greedy or
sampled decoding, a speedup of decode or end to end, a context before every prompt, and
whatever axis comes next. Each axis is **one module of this package**, found by looking (as
backend folders are), holding one :class:`Axis` instance named ``AXIS``: its keyword in
``specdec.compare(...)`` and ``specdec.sweep(...)``, its marker, how its value is checked,
labelled in keys and rows, said in a verdict's statement, stored and read back.

A :class:`Conditions` value is built once from a test's markers and arguments and travels
unchanged into the plan, the stored record, the baseline key, the report, the plot and the
gate's re-measurement. It keeps only values that differ from their axis's default, so a
comparison under defaults has the same conditions (and key) whatever axes exist.

Example — an axis module ``pytest_specdec/axes/warmth.py``::

    class Warmth(Axis[int]):
        name = keyword = "warmth"
        title = "warmth"
        default = 0
        order = 60

        def parse(self, value: object) -> int:
            return whole_number(self.name, value, low=0, high=10)

        def label(self, value: int) -> str:
            return f"warm={value}"

    AXIS = Warmth()
"""

from __future__ import annotations

import importlib
import math
import pkgutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cache
from typing import Any, ClassVar, Generic, TypeVar

from pytest_specdec.errors import SpecdecUsageError

V = TypeVar("V")
MarkerArguments = tuple[tuple[object, ...], Mapping[str, object]]
MarkerLookup = Callable[[str], "MarkerArguments | None"]
"""A test's closest marker of a name, as ``(args, kwargs)``, or ``None`` when it has none."""


class Axis(Generic[V]):
    """One axis of a comparison. Subclasses set the class attributes and override what differs.

    ``name`` is the key in stored files; ``keyword`` the argument of ``compare``/``sweep``;
    ``order`` places the axis in keys, labels and statements; ``default`` is the value a
    comparison has when nothing asks for another (never stored, never in a key, except where
    ``always_in_key``); ``own_column`` axes are shown in a column of their own, not among a
    row's conditions; a ``knob`` is a setting a user tunes (a sweep over it names the best value).

    Example::

        >>> from pytest_specdec.axes.context import AXIS as CONTEXT
        >>> CONTEXT.label(8192), CONTEXT.statement(8192)
        ('ctx=8K', ', behind 8192 tokens of context')
    """

    name: ClassVar[str]
    keyword: ClassVar[str]
    title: ClassVar[str]  # "context" in "context sweep"
    order: ClassVar[int]
    default: Any = None
    marker: ClassVar[str | None] = None  # @pytest.mark.<marker>(...) sets it for a test
    marker_help: ClassVar[str] = ""  # the line ``pytest --markers`` shows
    always_in_key: ClassVar[bool] = False
    own_column: ClassVar[bool] = False
    knob: ClassVar[bool] = False
    plot_scale: ClassVar[str] = "linear"  # or "symlog": how a sweep's plot spaces the values
    axis_label: ClassVar[str] = ""  # the x label of a sweep's plot (its title when empty)
    tells_prompt_tokens: ClassVar[bool] = False  # a sweep's line says each value's prompt tokens as they ran

    def parse(self, value: object) -> V:
        """A keyword's or marker's value, checked: one line naming the argument and the fix when it is wrong."""
        raise NotImplementedError

    def from_keywords(self, given: Mapping[str, object], current: V) -> V:
        """The value that ``compare``'s keywords for this axis ask for, over the test's markers' ``current``."""
        return self.parse(given[self.keyword])

    @property
    def keywords(self) -> tuple[str, ...]:
        """Every keyword of ``compare`` this axis reads (the sampling axis reads two)."""
        return (self.keyword,)

    def from_marker(self, lookup: MarkerLookup) -> V | None:
        """The value a test's markers give (``None``: they say nothing of this axis)."""
        if self.marker is None or (found := lookup(self.marker)) is None:
            return None
        args, kwargs = found
        if len(args) + len(kwargs) != 1 or (kwargs and self.keyword not in kwargs):
            raise SpecdecUsageError(
                f"@pytest.mark.{self.marker} takes one value, e.g. @pytest.mark.{self.marker}({self.example()!r})"
            )
        return self.parse(args[0] if args else kwargs[self.keyword])

    def example(self) -> object:
        """A value to show in a usage line."""
        return self.default

    def dump(self, value: V) -> object:
        """The value as JSON."""
        return value

    def load(self, data: object) -> V:
        """A stored value back (validated as a keyword's would be)."""
        return self.parse(data)

    def label(self, value: V) -> str:
        """The value in keys, rows and sweeps: ``ctx=8K``."""
        return f"{self.name}={value}"

    def row_label(self, value: V) -> str:
        """The value among a row's conditions (its key label, unless a shorter one reads better)."""
        return self.label(value)

    def statement(self, value: V) -> str:
        """What a verdict's statement adds under this value: ``, behind 8192 tokens of context``."""
        return f", {self.label(value)}"

    def position(self, value: V) -> float:
        """Where a sweep's plot puts the value."""
        return float(value)  # type: ignore[arg-type]

    def legacy(self, comparison: Mapping[str, Any]) -> V | None:
        """The value a comparison stored before conditions were kept as one object (schema 2), if any."""
        return None

    def backend_options(self, value: V) -> dict[str, str]:
        """Options the backend must be loaded with to run this value (a server's slots)."""
        return {}

    def refusal(self, value: V, backend: object) -> str | None:
        """Why ``backend`` cannot run this value, in one line (``None``: it can)."""
        return None


def whole_number(name: str, value: object, *, low: int, high: int) -> int:
    """``value`` as an int in ``[low, high]``, or one line naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not float(value).is_integer():
        raise SpecdecUsageError(f"{name}={value!r} is not a whole number — give e.g. {name}={max(low, 1)}")
    if not low <= int(value) <= high:
        raise SpecdecUsageError(f"{name}={value!r} is outside {low}–{high} — give a value in that range")
    return int(value)


def real_number(name: str, value: object) -> float:
    """``value`` as a finite float, or one line naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SpecdecUsageError(f"{name}={value!r} is not a number — give e.g. {name}=0.7")
    return float(value)


def marker_keywords(marker: str, args: Sequence[object], kwargs: Mapping[str, object], allowed: Sequence[str]) -> None:
    """A marker that takes keywords only, and only ``allowed``: else one line naming the marker and its keywords."""
    if args:
        raise SpecdecUsageError(
            f"@pytest.mark.{marker} takes keyword arguments only ({', '.join(allowed)}), got {args!r}"
        )
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise SpecdecUsageError(f"@pytest.mark.{marker} has no argument {unknown[0]!r} — use {', '.join(allowed)}")


@cache
def registered_axes() -> tuple[Axis[Any], ...]:
    """Every axis: each module of this package's ``AXIS``, in their ``order``."""
    found = []
    for module in pkgutil.iter_modules(__path__):
        axis = getattr(importlib.import_module(f"{__name__}.{module.name}"), "AXIS", None)
        if isinstance(axis, Axis):
            found.append(axis)
    return tuple(sorted(found, key=lambda a: a.order))


def axis_named(name: str) -> Axis[Any]:
    """The axis stored under ``name``."""
    for axis in registered_axes():
        if axis.name == name:
            return axis
    known = ", ".join(a.name for a in registered_axes())
    raise SpecdecUsageError(f"no axis {name!r} — the axes are {known}")


def axis_of_keyword(keyword: str, where: str) -> Axis[Any]:
    """The axis a ``compare``/``sweep`` keyword belongs to, or one line listing the keywords."""
    for axis in registered_axes():
        if keyword in axis.keywords:
            return axis
    known = ", ".join(k for a in registered_axes() for k in a.keywords)
    raise SpecdecUsageError(f"{where}() has no argument {keyword!r} — its conditions are {known}")


class Conditions:
    """What a comparison ran under: a value per axis, defaults left out. Frozen, hashable, stored as an object.

    Example::

        >>> from pytest_specdec.axes.context import AXIS as CONTEXT
        >>> c = Conditions.of({"num_draft": 3, "context": 8192})
        >>> c.get(CONTEXT), c.key_labels, c.dump()
        (8192, ('γ=3', 'ctx=8K'), {'context': 8192, 'num_draft': 3})
    """

    __slots__ = ("_values",)
    _values: tuple[tuple[str, Any], ...]

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        """Values already checked, by axis name (use :meth:`of` for names a user wrote)."""
        kept = {}
        for name, value in (values or {}).items():
            axis = axis_named(name)
            if value is not None and value != axis.default:
                kept[name] = value
        ordered = sorted(kept.items(), key=lambda item: axis_named(item[0]).order)
        object.__setattr__(self, "_values", tuple(ordered))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Conditions is frozen: use with_()")

    @classmethod
    def of(cls, values: Mapping[str, object]) -> Conditions:
        """Conditions from raw values by axis name, each checked by its axis."""
        return cls({name: axis_named(name).parse(value) for name, value in values.items() if value is not None})

    def get(self, axis: Axis[V]) -> V:
        """This comparison's value on ``axis`` (its default when not set)."""
        return dict(self._values).get(axis.name, axis.default)  # type: ignore[no-any-return]

    def with_(self, **values: object) -> Conditions:
        """These conditions with some axes set (by name; ``None`` or the default clears one)."""
        return Conditions({**dict(self._values), **values})

    def items(self) -> Iterator[tuple[Axis[Any], Any]]:
        """``(axis, value)`` for every axis set, in axis order."""
        for name, value in self._values:
            yield axis_named(name), value

    @property
    def key_labels(self) -> tuple[str, ...]:
        """The labels a baseline key carries: ``("γ=3", "T=0.7", "ctx=8K")``."""
        shown = dict(self._values)
        return tuple(
            axis.label(shown.get(axis.name, axis.default))
            for axis in registered_axes()
            if axis.name in shown or axis.always_in_key
        )

    @property
    def labels(self) -> tuple[str, ...]:
        """The labels a row shows among its conditions (axes with a column of their own left out)."""
        return tuple(axis.row_label(value) for axis, value in self.items() if not axis.own_column)

    def statement(self) -> str:
        """What a verdict's statement adds: ``" at T=0.7, end to end, behind 8192 tokens of context"``."""
        return "".join(axis.statement(value) for axis, value in self.items() if not axis.own_column)

    def backend_options(self) -> dict[str, str]:
        """Options the backend is loaded with for these conditions."""
        options: dict[str, str] = {}
        for axis, value in self.items():
            options.update(axis.backend_options(value))
        return options

    def refusals(self, backend: object) -> list[str]:
        """Why ``backend`` cannot run these conditions, a line an axis."""
        return [line for axis, value in self.items() if (line := axis.refusal(value, backend)) is not None]

    def dump(self) -> dict[str, object]:
        """As stored in results, baseline and history files: ``{"context": 8192, "num_draft": 3}``."""
        return {name: axis_named(name).dump(value) for name, value in sorted(self._values)}

    @classmethod
    def load(cls, data: object) -> Conditions:
        """Stored conditions back; an axis this release does not know is one line (the file is newer)."""
        if isinstance(data, Conditions):
            return data
        if not isinstance(data, Mapping):
            raise SpecdecUsageError(f"conditions must be an object of axis values, not {data!r}")
        known = {a.name for a in registered_axes()}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SpecdecUsageError(
                f"conditions name the axis {unknown[0]!r}, which this pytest-specdec does not know — upgrade it"
            )
        return cls({name: axis_named(name).load(value) for name, value in data.items()})

    @classmethod
    def legacy(cls, comparison: Mapping[str, Any]) -> Conditions:
        """The conditions of a comparison stored before they were one object (its ``num_draft`` and ``scope``)."""
        return cls({axis.name: axis.legacy(comparison) for axis in registered_axes()})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Conditions) and self._values == other._values

    def __hash__(self) -> int:
        return hash(self._values)

    def __repr__(self) -> str:
        return f"Conditions({dict(self._values)!r})"

    def __copy__(self) -> Conditions:
        return self  # immutable

    def __deepcopy__(self, memo: dict[int, object]) -> Conditions:
        return self

    def __reduce__(self) -> tuple[type[Conditions], tuple[dict[str, Any]]]:
        return Conditions, (dict(self._values),)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: object, handler: object) -> Any:
        """Validated from its stored object by :meth:`load` when a results or baseline file is read."""
        from pydantic_core import core_schema

        return core_schema.no_info_plain_validator_function(
            cls.load, serialization=core_schema.plain_serializer_function_ser_schema(lambda c: c.dump())
        )


DEFAULT_CONDITIONS = Conditions()  # every axis at its default (γ unset: the run's)


def from_markers(lookup: MarkerLookup) -> Conditions:
    """The conditions a test's markers set (a marker's bad value is one line naming it)."""
    values = {}
    for axis in registered_axes():
        value = axis.from_marker(lookup)
        if value is not None:
            values[axis.name] = value
    return Conditions(values)


def from_keywords(given: Mapping[str, object], marked: Conditions, where: str) -> Conditions:
    """``compare``'s condition keywords over the markers' conditions; an unknown keyword is one line."""
    by_axis: dict[str, Axis[Any]] = {}
    for keyword in given:
        axis = axis_of_keyword(keyword, where)
        by_axis[axis.name] = axis
    chosen = {
        name: axis.from_keywords({k: v for k, v in given.items() if k in axis.keywords}, marked.get(axis))
        for name, axis in by_axis.items()
    }
    return marked.with_(**chosen)


def sweep_axis(given: Mapping[str, Sequence[object]], where: str = "sweep") -> tuple[Axis[Any], Sequence[object]]:
    """The one axis a sweep names (``sweep(context=[0, 2048])``) and its values, or one line saying what is wrong."""
    primary = [a.keyword for a in registered_axes() if a.keywords]
    if len(given) != 1:
        raise SpecdecUsageError(
            f"{where}() takes one axis and its values, e.g. {where}(num_draft=[1, 2, 4]) — the axes are "
            + ", ".join(primary)
        )
    ((keyword, values),) = given.items()
    axis = axis_of_keyword(keyword, where)
    if keyword != axis.keyword:
        raise SpecdecUsageError(f"{where}() sweeps {axis.keyword}=, not {keyword}= — give {axis.keyword}=[…]")
    if isinstance(values, str | bytes) or not isinstance(values, Sequence) or not values:
        raise SpecdecUsageError(
            f"{where}({keyword}={values!r}) needs a non-empty list of values, e.g. {keyword}=[{axis.example()!r}]"
        )
    return axis, values


__all__ = [
    "DEFAULT_CONDITIONS",
    "Axis",
    "Conditions",
    "MarkerLookup",
    "axis_named",
    "from_keywords",
    "from_markers",
    "marker_keywords",
    "real_number",
    "registered_axes",
    "sweep_axis",
    "whole_number",
]
