"""Audits of a target: what each run removed and why, what of a record is left, samples for review.

Only :func:`note_view`, :func:`sample` and ``leaks(show_values=True)`` read PHI back; they are the
operator's tools on the secure side and the CLI prints PHI only when those are asked for.
"""

from __future__ import annotations

import getpass
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import regex
import sqlalchemy as sa

from anonymizer.config import Config
from anonymizer.detectors import Detector
from anonymizer.detectors.patterns import PatternDetector
from anonymizer.normalize import normalize
from anonymizer.registry import record_detectors
from anonymizer.resources import data_dir
from anonymizer.review import marks
from anonymizer.settings import ConfigError, DetectorsConfig, read_text_file
from anonymizer.source import Source
from anonymizer.spans import CATEGORIES
from anonymizer.target import Target

TAG = regex.compile(r"\[(?:" + "|".join(CATEGORIES) + r")\]")


@dataclass
class RunReport:
    run_id: int
    kind: str
    status: str
    started_at: str
    notes_done: int
    notes_skipped: int
    notes_failed: int
    notes_without_detection: int = 0
    spans_by_category: Counter[str] = field(default_factory=Counter)
    spans_by_detector: Counter[str] = field(default_factory=Counter)  # spans each detector took part in
    spans_only_by: Counter[str] = field(default_factory=Counter)  # spans no other detector found
    failures: Counter[str] = field(default_factory=Counter)  # failure reasons of notes still failed


def summary(target: Target, run_id: int | None = None) -> list[RunReport]:
    """One report per run (or for `run_id` only), from the rows the target holds for it now."""
    runs, notes, spans = target.runs, target.notes, target.spans
    query = sa.select(runs).order_by(runs.c.run_id)
    if run_id is not None:
        query = query.where(runs.c.run_id == run_id)
    reports = []
    with target.engine.connect() as conn:
        for row in conn.execute(query).mappings():
            report = RunReport(
                row["run_id"], row["kind"], row["status"], str(row["started_at"]),
                row["notes_done"], row["notes_skipped"], row["notes_failed"],
            )
            in_run = sa.select(notes.c.note_id).where(notes.c.run_id == report.run_id).scalar_subquery()
            for (detectors,) in conn.execute(sa.select(spans.c.detectors).where(spans.c.note_id.in_(in_run))):
                groups = {source.split(":", 1)[0] for source in detectors.split(",")}
                report.spans_by_detector.update(groups)
                if len(groups) == 1:
                    report.spans_only_by.update(groups)
            category_counts = sa.select(spans.c.category, sa.func.count()).where(spans.c.note_id.in_(in_run))
            report.spans_by_category.update(dict(conn.execute(category_counts.group_by(spans.c.category)).all()))
            silent = sa.select(sa.func.count()).where(
                notes.c.run_id == report.run_id, ~notes.c.note_id.in_(sa.select(spans.c.note_id).distinct())
            )
            report.notes_without_detection = conn.execute(silent).scalar_one()
            reasons = sa.select(target.failures.c.reason, sa.func.count()).where(target.failures.c.run_id == report.run_id)
            report.failures.update(dict(conn.execute(reasons.group_by(target.failures.c.reason)).all()))
            reports.append(report)
    if run_id is not None and not reports:
        raise ConfigError(f"no run {run_id} in the target")
    return reports


@dataclass(frozen=True)
class NoteView:
    """A source note with its stored detections, beside its anonymized text (PHI: operator only)."""

    note_id: str
    source_text: str
    anonymized_text: str | None
    spans: list[tuple[int, int, str, str]]  # start, end, category, detectors
    failure: str | None
    replacements: list[str | None] = field(default_factory=list)  # what each span became: tag or surrogate


def note_view(config: Config, target: Target, note_id: str) -> NoteView:
    note = Source(config).notes_by_id([note_id]).get(note_id)
    if note is None:
        raise ConfigError(f"note {note_id} not found in the source")
    t = target
    with t.engine.connect() as conn:
        text = conn.execute(sa.select(t.notes.c.text).where(t.notes.c.note_id == note_id)).scalar_one_or_none()
        rows = conn.execute(
            sa.select(t.spans.c.start, t.spans.c.end, t.spans.c.category, t.spans.c.detectors)
            .where(t.spans.c.note_id == note_id)
            .order_by(t.spans.c.start)
        ).all()
        failure = conn.execute(sa.select(t.failures.c.reason).where(t.failures.c.note_id == note_id)).scalar_one_or_none()
    spans = [tuple(r) for r in rows]
    replacements = _replacements(config, note, text, spans) if text is not None else [None] * len(spans)
    return NoteView(note_id, note.text, text, spans, failure, replacements)


def _replacements(config: Config, note, released: str, spans: list[tuple]) -> list[str | None]:
    """What each stored span became in the released text.

    In surrogate mode with the secret at hand, the surrogates are recomputed from the record (and
    kept only if they rebuild the stored text exactly); otherwise they are read off the released
    text, between the unchanged stretches around each span.  None where that is ambiguous.
    """
    from anonymizer.spans import MergedSpan

    merged = [MergedSpan(start, end, category, tuple(detectors.split(","))) for start, end, category, detectors in spans]
    if config.replace.mode == "surrogates":
        try:
            from anonymizer.surrogates import build_replacer

            rules = data_dir("rules")
            patterns = PatternDetector.from_rules(rules)
            threshold = config.detectors.name_threshold
            replacer = build_replacer(config.replace, rules, patterns.date_pattern, threshold, leak_detectors(rules, threshold, patterns))
            record = Source(config).records([note.patient_id])[note.patient_id]
            values = replacer.surrogates(note.text, merged, record)
            if _rebuild(note.text, merged, values) == released:
                return list(values)
        except ConfigError:
            pass  # no secret here: read the surrogates off the text instead
    return _align(note.text, merged, released)


def _rebuild(text: str, spans, values) -> str:
    parts, position = [], 0
    for span, value in zip(spans, values):
        parts += [text[position : span.start], value]
        position = span.end
    return "".join(parts + [text[position:]])


def _align(text: str, spans, released: str) -> list[str | None]:
    """Each span's replacement, as the stretch of `released` between the unchanged text around it."""
    gaps = [text[(spans[i - 1].end if i else 0) : s.start] for i, s in enumerate(spans)] + [text[spans[-1].end :] if spans else text]
    readings = []
    for group in ("(.*?)", "(.*)"):  # the shortest and the longest reading: where they differ, it is ambiguous
        try:
            found = regex.fullmatch(group.join(regex.escape(g) for g in gaps), released, flags=regex.DOTALL, timeout=1.0)
        except TimeoutError:
            found = None
        if found is None:
            return [None] * len(spans)
        readings.append(found.groups())
    return [a if a == b else None for a, b in zip(*readings)]


@dataclass(frozen=True)
class Leak:
    """What is left of a patient's record in an anonymized note: where, and which field."""

    note_id: str
    patient_id: str
    field: str  # name, relative, identifier, phone, date, address
    start: int
    end: int
    value: str  # shown only with --show-values


def leak_detectors(rules_dir: Path, name_threshold: float, patterns: PatternDetector | None = None) -> list[Detector]:
    """The record detectors, run over released text, as the run builds them: whatever they find
    there is a leak (a birthday's "6/10" in "pain 6/10" is a score there as in the run).
    `patterns`: the rules' detector, if the caller has built it already."""
    patterns = patterns or PatternDetector.from_rules(rules_dir)
    return record_detectors(rules_dir, name_threshold, patterns.date_pattern, patterns.excused)


def gate_name_threshold(configured: float) -> float:
    """The gate matches names at least as loosely as the shipped threshold: a run configured to
    match them strictly (or not at all, 0.0) must not switch the gate off with it."""
    return max(configured, DetectorsConfig().name_threshold)


class LeakScan:
    """The leaks of every anonymized note, streaming the target; `notes` counts the notes read.

    Each released text is scanned as a reader sees it (:mod:`anonymizer.normalize`: invisible
    characters removed, full-width forms folded) and, where invisible characters were removed, as
    stored too; findings are offsets into the stored text.
    """

    def __init__(self, config: Config, target: Target, batch_size: int = 500) -> None:
        self.name_threshold = gate_name_threshold(config.detectors.name_threshold)
        self.notes = 0
        self._config, self._target, self._batch_size = config, target, batch_size

    def __iter__(self) -> Iterator[Leak]:
        source = Source(self._config)
        detectors = leak_detectors(data_dir("rules"), self.name_threshold)
        t = self._target.notes
        query = sa.select(t.c.note_id, t.c.patient_id, t.c.text).order_by(t.c.patient_id, t.c.note_id)
        with self._target.engine.connect() as conn:
            result = conn.execution_options(stream_results=True, yield_per=self._batch_size).execute(query)
            for rows in result.partitions(self._batch_size):
                records = source.records({patient for _, patient, _ in rows})
                for note_id, patient, text in rows:
                    self.notes += 1
                    # Tags are our own words; a patient called "Patience" must not match "[PATIENT]".
                    view = normalize(TAG.sub(lambda m: " " * len(m.group()), text))
                    found: dict[tuple[int, int, str], None] = {}
                    for detector in detectors:
                        spans = [*view.to_original(detector(view.text, records[patient]))]
                        if view.removed:
                            spans += detector(view.original, records[patient])
                        found.update(((s.start, s.end, s.rule), None) for s in spans)
                    for start, end, field in found:
                        yield Leak(note_id, patient, field, start, end, text[start:end])


def leaks(config: Config, target: Target, batch_size: int = 500) -> LeakScan:
    """Scan every anonymized note for its own patient's record (iterate over the result)."""
    return LeakScan(config, target, batch_size)


def sample(config: Config, target: Target, n: int, seed: int) -> list[dict]:
    """A reproducible random sample of anonymized notes, as records a reviewer can mark up."""
    with target.engine.connect() as conn:
        chosen = marks.sample_ids(conn, target, n, seed)
        spans: dict[str, list[dict]] = {note_id: [] for note_id in chosen}
        s = target.spans
        for note_id, start, end, category, detectors in conn.execute(
            sa.select(s.c.note_id, s.c.start, s.c.end, s.c.category, s.c.detectors)
            .where(s.c.note_id.in_(chosen))
            .order_by(s.c.note_id, s.c.start)
        ):
            spans[note_id].append(dict(start=start, end=end, category=category, detectors=detectors))
    notes = Source(config).notes_by_id(chosen)
    return [
        dict(note_id=i, patient_id=notes[i].patient_id, text=notes[i].text, detections=spans[i], missed=[], wrong=[])
        for i in chosen
        if i in notes
    ]


@dataclass(frozen=True)
class ReviewLine:
    """One note of a reviewed sample file: its marks as (start, end, category, verdict)."""

    note_id: str
    text: str
    reviewer: str | None
    sampled: bool
    spans: tuple[tuple[int, int, str, str], ...]


def read_review_line(line: str) -> ReviewLine:
    """One line of a reviewed sample; a span is given by offsets or by its text (every occurrence).

    ValueError (one line, no note text) for what is not a review line."""
    try:
        item = json.loads(line)
    except json.JSONDecodeError:
        raise ValueError("not JSON") from None
    if not isinstance(item, dict):
        raise ValueError("not a JSON object")
    if "note_id" not in item or not isinstance(item.get("text"), str):
        raise ValueError("a review line needs note_id and text")
    text, spans = item["text"], []
    detections = {(d.get("start"), d.get("end")): d.get("category") for d in item.get("detections") or [] if isinstance(d, dict)}
    for verdict in ("missed", "wrong", "category"):
        for span in item.get(verdict) or []:
            if not isinstance(span, dict):
                raise ValueError(f"a {verdict} span is not an object")
            for start, end in _offsets(span, text, verdict):
                category = span.get("category") or detections.get((start, end)) or ("NAME" if verdict != "category" else None)
                if category not in CATEGORIES:
                    raise ValueError(f"a {verdict} span without a known category")
                if not 0 <= start < end <= len(text):
                    raise ValueError(f"a {verdict} span {start}-{end} outside the note")
                spans.append((start, end, category, verdict))
    reviewer = item.get("reviewer")
    return ReviewLine(str(item["note_id"]), text, str(reviewer) if reviewer else None, bool(item.get("sampled", True)), tuple(spans))


def _offsets(span: dict, text: str, verdict: str) -> list[tuple[int, int]]:
    if "start" in span and "end" in span:
        try:
            return [(int(span["start"]), int(span["end"]))]
        except (TypeError, ValueError):
            raise ValueError(f"a {verdict} span's start and end are not numbers") from None
    words = span.get("text")
    if not isinstance(words, str) or not words:
        raise ValueError(f"a {verdict} span needs start and end, or text")
    found = [m.start() for m in regex.finditer(regex.escape(words), text)]
    if not found:
        raise ValueError(f"a {verdict} span's text is not in the note")
    return [(start, start + len(words)) for start in found]


def import_review(target: Target, path: Path, reviewer: str | None = None) -> Counter[str]:
    """Store a reviewed sample file: each line's marks, and the line as the note's finished review.

    The reviewer is `reviewer`, else the line's "reviewer", else the user running the command.
    Importing a file again stores nothing twice; returns the counts of marks per verdict and of
    those new ("new")."""
    lines = []
    for number, line in enumerate(read_text_file(path, "review file").splitlines(), 1):
        if line.strip():
            try:
                lines.append(read_review_line(line))
            except ValueError as exc:
                raise ConfigError(f"{path}:{number}: not a review line ({exc})") from None
    known = marks.run_ids(target, [line.note_id for line in lines])
    for line in lines:
        if line.note_id not in known:
            raise ConfigError(f"{path}: note {line.note_id!r} is not among the target's anonymized notes")
    counts: Counter[str] = Counter()
    for line in lines:
        who = marks.check_reviewer(reviewer or line.reviewer or getpass.getuser())
        for start, end, category, verdict in line.spans:
            _, created = marks.add_mark(target, line.note_id, start, end, category, verdict, who, len(line.text))
            counts.update([verdict] + ["new"] * created)
        marks.accept(target, line.note_id, who, line.text, line.sampled)
    return counts
