"""The markers over their argument space (issue #51): any value a test file can put in ``speedup``,
``acceptance``, ``claim`` or an axis marker is parsed or refused in one line naming the marker — never another
exception (pytest would show it as an INTERNALERROR), checked before anything is measured."""

from __future__ import annotations

import math

from hypothesis import example, given, settings
from hypothesis import strategies as st

from pytest_specdec.axes import from_markers, registered_axes
from pytest_specdec.claims import parse_acceptance, parse_claim, parse_speedup
from pytest_specdec.errors import SpecdecUsageError

PARSERS = {"speedup": parse_speedup, "acceptance": parse_acceptance, "claim": parse_claim}
AXIS_MARKERS = {str(axis.marker): axis.keywords for axis in registered_axes() if getattr(axis, "marker", None)}
KEYWORDS = ["min", "max", "of", "id", "source", "quote", "applies_to", "bogus"] + [
    keyword for keywords in AXIS_MARKERS.values() for keyword in keywords
]
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["decode", "end-to-end", "1.2", "nan", "\r\n", "seed", "embedded"]),
    st.lists(st.one_of(st.integers(), st.text(max_size=4)), max_size=3),
    st.tuples(st.floats(allow_nan=True), st.text(max_size=3)),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


def _one_line(error: SpecdecUsageError, marker: str) -> None:
    said = str(error)
    assert said, "an empty refusal says nothing"
    assert "\n" not in said, said
    assert marker in said, f"the line names the marker: {said}"


def _parse(marker: str, args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    """What the plugin does with one marker at collection: its claim parser, or the axes' reading of it."""
    if marker in PARSERS:
        PARSERS[marker](args, kwargs)
        return

    def lookup(name: str) -> tuple[tuple[object, ...], dict[str, object]] | None:
        return (args, kwargs) if name == marker else None

    from_markers(lookup)


@settings(max_examples=700, deadline=None)
@given(
    marker=st.sampled_from(sorted(PARSERS) + sorted(AXIS_MARKERS)),
    args=st.lists(VALUES, max_size=3).map(tuple),
    kwargs=st.dictionaries(st.sampled_from(KEYWORDS), VALUES, max_size=4),
)
@example(marker="speedup", args=(), kwargs={"min": math.nan})
@example(marker="speedup", args=(), kwargs={"max": 10**30})
@example(marker="acceptance", args=(), kwargs={"min": "0.5"})
@example(marker="claim", args=(), kwargs={"id": None, "applies_to": "seed"})
@example(marker="sampling", args=(), kwargs={"temperature": math.inf})
@example(marker="sampling", args=(), kwargs={"top_p": "x"})
@example(marker="concurrency", args=(), kwargs={"concurrency": -1})
def test_a_marker_is_parsed_or_refused_in_one_line(
    marker: str, args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    try:
        _parse(marker, args, kwargs)
    except SpecdecUsageError as error:
        _one_line(error, marker)
