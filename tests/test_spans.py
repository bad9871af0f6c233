from hypothesis import given
from hypothesis import strategies as st

from anonymizer.replace import replace_with_tags
from anonymizer.spans import CATEGORIES, MergedSpan, Span, union


def test_overlapping_and_touching_spans_merge_with_every_source():
    spans = [
        Span(0, 5, "DATE", "regex", "date_dmy"),
        Span(3, 8, "PATIENT", "record", "name"),
        Span(8, 10, "NAME", "honorific", "dr"),
        Span(12, 14, "ID", "regex", "nric"),
    ]
    assert union(spans) == [
        MergedSpan(0, 10, "PATIENT", ("honorific:dr", "record:name", "regex:date_dmy")),
        MergedSpan(12, 14, "ID", ("regex:nric",)),
    ]


def test_category_priority_is_fixed():
    a = union([Span(0, 4, "LOCATION", "lists", "location"), Span(0, 4, "DOCTOR", "svm")])
    assert a[0].category == "DOCTOR"


def test_empty_spans_are_dropped():
    assert union([Span(3, 3, "DATE", "regex")]) == []


spans_strategy = st.lists(
    st.builds(
        lambda s, length, c, d: Span(s, s + length, c, d),
        st.integers(0, 50),
        st.integers(0, 10),
        st.sampled_from(CATEGORIES),
        st.sampled_from(["record", "regex", "svm"]),
    ),
    max_size=12,
)


@given(spans_strategy, st.randoms())
def test_union_is_order_independent_and_idempotent(spans, rnd):
    merged = union(spans)
    shuffled = list(spans)
    rnd.shuffle(shuffled)
    assert union(shuffled) == merged
    again = union(Span(m.start, m.end, m.category, m.sources[0]) for m in merged)
    assert [(m.start, m.end, m.category) for m in again] == [(m.start, m.end, m.category) for m in merged]
    for left, right in zip(merged, merged[1:]):
        assert left.end < right.start


@given(st.text(max_size=60), spans_strategy)
def test_replacement_never_leaves_a_flagged_character(text, spans):
    spans = [s for s in spans if s.end <= len(text)]
    merged = union(spans)
    out = replace_with_tags(text, merged)
    expected_len = len(text) - sum(m.end - m.start for m in merged) + sum(len(m.category) + 2 for m in merged)
    assert len(out) == expected_len
    # Every unflagged character survives in order; no flagged one is copied.
    kept = [c for i, c in enumerate(text) if not any(m.start <= i < m.end for m in merged)]
    stripped = out
    for m in merged:
        stripped = stripped.replace(f"[{m.category}]", "", 1)
    assert stripped == "".join(kept)
