"""Property-based tests of every detector, the union and the replacement over arbitrary text.

Text mixes PHI-like fragments (the record's names, IDs, phones, dates, honorifics, list entries)
with arbitrary code points: control characters, NUL, CJK, right-to-left scripts and bidi controls,
combining marks, anything but surrogates (which no database driver hands over).
"""

from __future__ import annotations

import base64
import datetime as dt
import os
import random
import tracemalloc

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from anonymizer.pipeline import anonymize_patient, build_pipeline
from anonymizer.record import Note, PatientRecord
from anonymizer.replace import replace_with_tags
from anonymizer.settings import ClassifierConfig, DetectorsConfig
from anonymizer.spans import CATEGORIES, MergedSpan, Span, union

LISTS = {"DOCTOR": ["Quiley", "K H Tan"], "HOSPITAL": ["Singapore General Hospital"], "LOCATION": ["Lorong Lew Lian"]}
PIPELINE = build_pipeline(DetectorsConfig(), LISTS, ClassifierConfig(enabled=False))
RECORD = PatientRecord(
    "1",
    names=("Marisette", "Vrabel", "José", "O'Brien", "陈", "大文"),
    relatives=("Mary Vrabel", "Siobhán Ní Bhriain"),
    identifiers=("S1234567D",),
    phones=("+65 9123 4567",),
    dates=(dt.date(1950, 3, 12),),
    addresses=("Blk 12 Lorong Lew Lian #05-12 Singapore 530012",),
)
FRAGMENTS = [
    "Marisette", "marisete", "VRABEL", "José", "Jose", "O'Brien", "陈 大文", "Mary", "Siobhán", "S1234567D",
    "s 1234567 d", "9123 4567", "+65-9123-4567", "12/03/1950", "12 Mar 1950", "3rd of March 2019", "Dr. K H Tan",
    "Mdm Siti binte Ali", "Mr", "dr", "Quiley", "Singapore General Hospital", "Lorong Lew Lian", "#05-12",
    "john.tan@example.com", "http://x.example/a?b", "age 93", "BP 120/70", "c/o", "2/7", "\x00", "\u202e", "\u200d",
]
SPECIAL = st.sampled_from(
    [chr(c) for c in range(0x00, 0x20)] + [chr(c) for c in range(0x7F, 0xA0)]
    + ["\u2028", "\u2029", "\u200b", "\u200e", "\u200f", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066",
       "\u2069", "\ufeff", "\u0301", "\ufffd"]
)
ALPHABET = st.one_of(
    st.characters(exclude_categories=("Cs",)),  # any code point but surrogates
    st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),  # CJK
    st.characters(min_codepoint=0x0590, max_codepoint=0x06FF),  # Hebrew, Arabic
    SPECIAL,
    st.sampled_from(" .,;:/-'#()\n\t0123456789"),
)
TEXT = st.lists(
    st.one_of(st.text(ALPHABET, max_size=12), st.sampled_from(FRAGMENTS)), max_size=14
).flatmap(lambda parts: st.sampled_from(["", " ", "\n"]).map(lambda sep: sep.join(parts)))
NAMES = st.lists(st.text(st.characters(categories=("L",)), min_size=1, max_size=10), max_size=3).map(tuple)
RECORDS = st.one_of(st.just(RECORD), st.builds(lambda n, r: PatientRecord("2", names=n, relatives=r), NAMES, NAMES))
# Modest by default so the suite stays fast; ANONYMIZER_FUZZ_EXAMPLES=5000 for a long hunt.
EXAMPLES = int(os.environ.get("ANONYMIZER_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def spans_of(text: str, record: PatientRecord) -> list[Span]:
    return [span for detector in PIPELINE.detectors for span in detector(text, record)]


@FUZZ
@given(TEXT, RECORDS)
def test_every_detector_returns_spans_within_the_text(text, record):
    for detector in PIPELINE.detectors:
        for span in detector(text, record):
            assert 0 <= span.start < span.end <= len(text), (detector.name, span)
            assert span.category in CATEGORIES and span.detector == detector.name


SPANS = st.lists(
    st.builds(
        lambda a, b, c, d: Span(min(a, b), max(a, b), c, d),
        st.integers(0, 60), st.integers(0, 60), st.sampled_from(CATEGORIES), st.sampled_from(["record", "regex:x", "lists"]),
    ),
    max_size=25,
)


def as_spans(merged: list[MergedSpan]) -> list[Span]:
    return [Span(m.start, m.end, m.category, source) for m in merged for source in m.sources]


@FUZZ
@given(TEXT, RECORDS, SPANS, st.randoms(use_true_random=False))
def test_union_is_sorted_disjoint_idempotent_and_order_independent(text, record, extra, rng: random.Random):
    spans = spans_of(text, record) + extra
    merged = union(spans)
    for a, b in zip(merged, merged[1:]):
        assert a.end < b.start  # sorted, neither overlapping nor touching
    covered = {i for s in spans for i in range(s.start, s.end)}
    assert covered == {i for m in merged for i in range(m.start, m.end)}  # nothing lost, nothing added
    assert union(as_spans(merged)) == merged  # idempotent
    shuffled = spans[:]
    rng.shuffle(shuffled)
    assert union(shuffled) == merged  # independent of the detectors' order


@FUZZ
@given(TEXT, RECORDS)
def test_replacement_never_leaves_a_flagged_character(text, record):
    merged = union(spans_of(text, record))
    out = replace_with_tags(text, merged)
    # Walk the output: every unflagged stretch is copied, every flagged one is exactly its tag.
    position = cursor = 0
    for span in merged:
        keep = text[position : span.start]
        assert out.startswith(keep, cursor)
        cursor += len(keep)
        tag = f"[{span.category}]"
        assert out.startswith(tag, cursor)
        cursor += len(tag)
        position = span.end
    assert out[cursor:] == text[position:]


@settings(max_examples=max(1, EXAMPLES // 2), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(TEXT, min_size=1, max_size=4), RECORDS)
def test_the_unit_of_work_never_fails_a_note(texts, record):
    notes = [Note(str(i), record.patient_id, t) for i, t in enumerate(texts)]
    results = anonymize_patient(record, notes, PIPELINE)
    assert [r.error for r in results] == [None] * len(notes)
    for note, result in zip(notes, results):
        assert result.text == replace_with_tags(note.text, result.spans)


# --- Large hostile notes through the whole pipeline, the shipped model included ------------------

BLOB = base64.b64encode(random.Random(0).randbytes(3_000)).decode()
RUNS = st.sampled_from([
    "é", "°", "1/", "12/12/2012 ", "12/03/", "9123 4567 ", "José ", "O'Brien", "S1234567D", "a", "1", " ", "\n", "Dr Quiley ",
    "3/12 ago ", "BP 120/70 ", "\u202e", "陈大文", "+", "-", ".", "Mar ", "(ab) ", "x/reg ", "\naddress: ", " in dr ", "d/w ",
    ", Hospital\n", " K (MO) ", "was in N. ", "Dear ", "call x1234 ", BLOB,
])


def hostile_note(parts: list[tuple[str, int]], length: int) -> str:
    """Runs of pieces, each repeated its count of times, in turn until `length` characters."""
    out: list[str] = []
    size = 0
    while size < length:
        for piece, count in parts:
            out.append(piece * min(count, (length - size) // len(piece) + 1))
            size += len(out[-1])
            if size >= length:
                break
    return "".join(out)[:length]


# Notes up to 1 MB mixing non-ASCII characters, long runs without spaces, dense dates and numbers, blobs.
HOSTILE = st.builds(hostile_note, st.lists(st.tuples(RUNS, st.integers(1, 50_000)), min_size=1, max_size=5), st.integers(0, 1_000_000))
HOSTILE_BUDGET = 2.0  # seconds per note
SHIPPED = build_pipeline(DetectorsConfig(note_timeout=HOSTILE_BUDGET), LISTS, ClassifierConfig())
# Peak memory allowed per character of the note, plus a constant: the pipeline keeps a few Python
# objects and a row of decision values per token, up to one token every two characters.
BYTES_PER_CHARACTER, BYTES_CONSTANT = 1_000, 64 * 2**20
# A few by default (each can take the budget twice over); ANONYMIZER_FUZZ_LARGE_EXAMPLES=50 for more.
LARGE_EXAMPLES = int(os.environ.get("ANONYMIZER_FUZZ_LARGE_EXAMPLES", "3"))


@settings(max_examples=LARGE_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(HOSTILE)
@example(("é " + "1/" * 500_000)[:1_000_000])
@example(("seen ° " + base64.b64encode(random.Random(1).randbytes(750_000)).decode())[:1_000_000])
@example(("12/12/2012 " * 91_000)[:1_000_000])
def test_a_hostile_note_up_to_1mb_ends_within_its_budget_in_memory_linear_in_its_length(text):
    """Each note ends as a result or as a NoteTimeout failure row (the budget bounds its time: no
    clock is read here), and its peak memory stays within a constant per character."""
    tracemalloc.start()
    try:
        [result] = anonymize_patient(RECORD, [Note("1", "1", text)], SHIPPED)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= BYTES_PER_CHARACTER * len(text) + BYTES_CONSTANT, (len(text), peak)
    if result.error is None:
        assert result.text == replace_with_tags(text, result.spans)
    else:
        assert result.text is None
        assert result.error == f"NoteTimeout: detection exceeded {HOSTILE_BUDGET}s on a note of {len(text)} characters"
