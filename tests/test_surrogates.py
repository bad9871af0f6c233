"""Surrogate mode: consistent pseudonyms, per-patient date shifts, format-preserving identifiers."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import time
import tomllib
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from anonymizer import audit
from anonymizer.cli import app
from anonymizer.config import load_config, parse_config
from anonymizer.detectors.names import RecordNames
from anonymizer.detectors.pattern_rules import load_rules, nric_checksum
from anonymizer.detectors.patterns import PatternDetector
from anonymizer.pipeline import anonymize_patient, build_pipeline
from anonymizer.record import Note, PatientRecord
from anonymizer.registry import record_detectors
from anonymizer.resources import data_dir
from anonymizer.run import run
from anonymizer.settings import ClassifierConfig, ConfigError, DetectorsConfig, ReplaceConfig
from anonymizer.source import Source
from anonymizer.spans import MergedSpan, union
from anonymizer.surrogates import (
    DAYS_PER_MONTH,
    SurrogateLists,
    SurrogateReplacer,
    nric_check_letter,
    parse_date,
)
from anonymizer.surrogates.dates import date_orders
from anonymizer.target import Target

ROOT = Path(__file__).resolve().parents[1]
RULES = data_dir("rules")
SECRET_ONE = "5e3f0c9a1b7d2e48a6c4f1d09b8e7a3c"  # 128 bits, as `openssl rand -hex 16` gives
SECRET_TWO = "c2a9e4f7b1d3085e6a9c7f2b4d1e0a83"
SURROGATES = ReplaceConfig(mode="surrogates")

RECORD = PatientRecord(
    patient_id="1",
    names=("Marisette", "Vrabel"),
    relatives=("Mary Vrabel",),
    identifiers=("S1234567D",),
    phones=("+65 9123 4567",),
    dates=(dt.date(1950, 3, 12),),
    addresses=("Blk 12 Lorong Lew Lian #05-12 Singapore 530012",),
)
NOTES = [
    Note("10", "1", "Pt MARISETTE VRABEL, NRIC S1234567D, seen by Dr. Quiley. Daughter Mary Vrabel called 9123 4567."),
    Note("11", "1", "marisete c/o vomiting, BP 120/70. DOB 12/03/1950. Admitted 3rd of March 2019, review 2019-03-20."),
    Note("12", "1", "Mdm M. Vrabel (ph +65 9123 4567) seen 10 Mar 2019; aged 92 yo; lives at Lorong Lew Lian."),
]


@pytest.fixture(scope="module")
def lists() -> SurrogateLists:
    return SurrogateLists.load(RULES / "surrogates")


@pytest.fixture(scope="module")
def date_pattern():
    return PatternDetector.from_rules(RULES).date_pattern


def replacer(secret: bytes, date_pattern, lists, config: ReplaceConfig = SURROGATES) -> SurrogateReplacer:
    return SurrogateReplacer(secret, config, RULES, date_pattern, 0.33, record_detectors(RULES, 0.33, date_pattern), lists=lists)


def pipeline(monkeypatch, secret: str = SECRET_ONE, config: ReplaceConfig = SURROGATES):
    monkeypatch.setenv("ANONYMIZER_SECRET", secret)
    return build_pipeline(DetectorsConfig(), {"DOCTOR": ["Quiley"]}, ClassifierConfig(enabled=False), replace=config)


def pairs(pipe, note: Note, record: PatientRecord = RECORD) -> list[tuple[str, str, str]]:
    """(category, original, surrogate) for each merged span of a note."""
    merged = anonymize_patient(record, [note], pipe)[0].spans  # what a run merges, view and budget included
    values = pipe.replace.surrogates(note.text, merged, record)
    return [(s.category, note.text[s.start : s.end], v) for s, v in zip(merged, values)]


# --- names -----------------------------------------------------------------------------------------


def test_names_are_consistent_across_notes_and_runs_and_keep_their_form(monkeypatch):
    first = anonymize_patient(RECORD, NOTES, pipeline(monkeypatch))
    again = anonymize_patient(RECORD, NOTES, pipeline(monkeypatch))  # a later run: a new pipeline
    assert [r.text for r in first] == [r.text for r in again]
    found = {o: v for note in NOTES for c, o, v in pairs(pipeline(monkeypatch), note) if c in ("PATIENT", "RELATIVE")}
    given, family = found["MARISETTE VRABEL"].split()
    assert given.isupper() and family.isupper()
    assert found["marisete"] == given.lower()  # the misspelling is the same person
    assert found["Mary Vrabel"].split()[1] == family.title()  # the relative shares the family surrogate
    assert found["M. Vrabel"] == f"{given[0]}. {family.title()}"  # initials stay initials
    for text in (r.text for r in first):
        assert "Vrabel" not in text and "MARISETTE" not in text.upper()
    assert "Mdm " in first[2].text and "Dr. " in first[0].text  # honorifics stay


def test_a_different_secret_gives_different_surrogates(monkeypatch):
    one = anonymize_patient(RECORD, NOTES, pipeline(monkeypatch, SECRET_ONE))
    two = anonymize_patient(RECORD, NOTES, pipeline(monkeypatch, SECRET_TWO))
    assert all(a.text != b.text for a, b in zip(one, two))
    assert pipeline(monkeypatch, SECRET_ONE).digest != pipeline(monkeypatch, SECRET_TWO).digest


def test_surrogates_keep_origin_kind_and_gender(date_pattern, lists):
    record = PatientRecord("7", names=("Siti", "binte Ahmad"), relatives=("Tan Wei Ming",))
    text = "Siti binte Ahmad and her husband Tan Wei Ming"
    names = [RecordNames.from_rules(RULES, f, c, 0.33) for f, c in (("names", "PATIENT"), ("relatives", "RELATIVE"))]
    spans = union([s for d in names for s in d(text, record)])
    out = replacer(b"k", date_pattern, lists)(text, spans, record)
    siti, binte, ahmad, *_ = out.split()
    tan, wei, ming = out.split()[-3:]
    assert binte == "binte"
    assert ("malay", "f") == _origin_gender(lists, siti) and ("malay", "family") in lists.kinds[ahmad.casefold()]
    assert ("chinese", "family") in lists.kinds[tan.casefold()]
    assert ("chinese", "given") in lists.kinds[wei.casefold()] and ("chinese", "given") in lists.kinds[ming.casefold()]


def _origin_gender(lists: SurrogateLists, name: str) -> tuple[str, str]:
    origin = next(o for o, k in lists.kinds[name.casefold()] if k == "given")
    return origin, lists.gender(name.casefold())


# --- dates -----------------------------------------------------------------------------------------


def test_intervals_between_a_patients_dates_are_kept_across_notes(monkeypatch):
    pipe = pipeline(monkeypatch)
    days = pipe.replace.shifts(RECORD)[0]
    assert 100 <= days <= 1000
    found = {o: v for note in NOTES for c, o, v in pairs(pipe, note) if c == "DATE"}
    read = {
        "12/03/1950": lambda t: dt.datetime.strptime(t, "%d/%m/%Y"),
        "3rd of March 2019": lambda t: dt.datetime.strptime(re.sub(r"(st|nd|rd|th) of", "", t), "%d %B %Y"),
        "2019-03-20": lambda t: dt.datetime.strptime(t, "%Y-%m-%d"),
        "10 Mar 2019": lambda t: dt.datetime.strptime(t, "%d %b %Y"),
    }
    for original, parse in read.items():
        assert (parse(original) - parse(found[original])).days == days, original


# Every [[date_order]] x [date_styles] rule of rules/dates.toml, and the fragment rules, with samples.
DATE_SAMPLES = {
    "date_cued_numeric": ["DOB |2-3-61", "seen |10/16", "FU |9.4"],
    "date_dmy_year4_numeric": ["2-3-1961", "25/12/2019"],
    "date_mdy_year4_numeric": ["12/25/2019"],
    "date_dmy_year2_numeric": ["25/12/19", "31-01-19"],
    "date_mdy_year2_numeric": ["12/25/19", "03-15-19"],
    "date_dmy_numeric": ["12/03/2019", "3/4/2019", "03.04.19", "3-4-2019", "31 01 2019"],
    "date_dmy_name": ["3rd of March 2019", "03-Mar-19", "03MAR2019", "3 march, 2019", "3 Sept 2019", "21ST JUNE 2018"],
    "date_mdy_numeric": ["3/15/2019", "03.15.19"],
    "date_mdy_name": ["March 3, 2019", "Mar. 3 2019", "MARCH 3RD 2019", "sep 30, 18"],
    "date_ymd_numeric": ["2019-03-04", "2019/3/4", "2019.03.04"],
    "date_ymd_name": ["2019 Mar 3", "2019-March-03"],
    "date_ydm_numeric": ["2019/15/03", "2019-28-2"],
    "date_ydm_name": ["2019 3 March", "2019-15-Jan"],
    "date_dm_numeric": ["15/3", "15/03"],
    "date_dm_name": ["3rd March", "14 April", "03-Mar"],
    "date_md_numeric": ["3/15"],
    "date_md_name": ["March 3rd", "Sept 14", "JAN 9"],
    "date_ym_numeric": ["2019/03", "2019-3"],
    "date_ym_name": ["2019 March", "2019-Mar"],
    "date_my_numeric": ["3/2019", "03/2019"],
    "date_my_name": ["March 2019", "Mar '19", "SEPT 2019", "dec 2019"],
    "date_my_dotted": ["08.2010"],
    "date_compact": ["20151103"],
    "date_iso_timestamp": ["2023-11-02T08:15:00Z"],
    "date_ordinal": ["the |11th", "the |3RD"],
    "month_alone": ["September", "june"],
    "month_short_cued": ["since |Feb", "in |aug"],
    "year": ["1992", "'95", "1990s"],
    "year_after_event": ["MI |92", "CABG in |84"],
}
# A "|" separates context a rule needs from the date it flags.
# Date rules whose matches no single date reading parses: a surrogate would be a guess, so the tag.
TAGGED_DATE_SAMPLES = {"date_range_glued": "10/03/10/04", "date_holiday": "Christmas", "date_range_named": "1-4 Apr"}


def test_the_samples_cover_every_date_rule():
    rules = tomllib.loads((RULES / "dates.toml").read_text(encoding="utf-8"))
    expected = {f"date_{o['name']}_{style}" for o in rules["date_order"] for style in o.get("styles", rules["date_styles"])}
    expected |= {p["name"] for p in rules.get("pattern", [])}
    assert expected == set(DATE_SAMPLES) | set(TAGGED_DATE_SAMPLES)


@pytest.mark.parametrize("rule_name,sample", sorted(TAGGED_DATE_SAMPLES.items()))
def test_a_date_no_reading_parses_becomes_the_tag(rule_name, sample, date_pattern, lists):
    record = PatientRecord("42")
    text = f"treatments {sample} and due again"
    spans = union(PatternDetector(load_rules(RULES))(text, record))
    assert [(text[s.start : s.end], s.sources) for s in spans] == [(sample, (f"regex:{rule_name}",))]
    assert replacer(b"k", date_pattern, lists)(text, spans, record) == "treatments [DATE] and due again"


@pytest.mark.parametrize("rule_name,sample", [(r, s) for r, samples in DATE_SAMPLES.items() for s in samples])
def test_every_date_format_is_preserved(rule_name, sample, date_pattern, lists):
    rules = {r.name: r for r in load_rules(RULES)}
    record = PatientRecord("42")
    text = f"seen {sample.replace('|', '')}."
    spans = [s for s in union(PatternDetector(list(rules.values()))(text, record)) if s.category == "DATE"]
    assert [text[s.start : s.end] for s in spans][-1:] == [sample.split("|")[-1]]
    span = spans[-1]
    if f"regex:{rule_name}" not in span.sources:  # "March 2019" also reads as March 20, '19 (mdy): kept longest
        rule_name = span.sources[0].removeprefix("regex:")
    surrogates = replacer(b"k", date_pattern, lists)
    days, months, years = surrogates.shifts(record)
    original = text[span.start : span.end]
    new = surrogates.surrogates(text, [span], record)[0]
    assert new != original
    released = text[: span.start] + new + text[span.end :]
    found = [m.span() for m in rules[rule_name].pattern.finditer(released)]
    assert (span.start, span.start + len(new)) in found, (original, new)  # the same rule still reads it
    assert re.sub(r"[\w]", "", new) == re.sub(r"[\w]", "", original)  # delimiters kept
    assert _case_shape(new) == _case_shape(original)
    assert [len(d) for d in re.findall(r"\d{3,}", new)] == [len(d) for d in re.findall(r"\d{3,}", original)]
    orders = date_orders([f"regex:{rule_name}"])
    before = parse_date(original, orders)
    after = parse_date(new, orders or [before.order])  # a cued date names no order: re-read as first read
    if before.full:
        shifted = dt.date(before.year, before.month, before.day) - dt.timedelta(days=days)
        assert (after.day, after.month, after.year % 100) == (shifted.day, shifted.month, shifted.year % 100)
    elif before.order in ("dm", "md"):
        shifted = dt.date(2001, before.month, before.day) - dt.timedelta(days=days)
        assert (after.day, after.month) == (shifted.day, shifted.month)
    elif before.order in ("my", "ym", "m"):
        assert (before.month - after.month) % 12 == months % 12
        if before.year:
            assert (before.year * 12 + before.month) - (after.year * 12 + after.month) == months
    elif before.order == "y":
        assert 0 < before.year - after.year <= years + 10
    assert months == max(1, round(days / DAYS_PER_MONTH))


def _case_shape(text: str) -> list[str]:
    return ["upper" if w.isupper() else "lower" if w.islower() else "title" for w in re.findall(r"[^\W\d_]{2,}", text)]


def test_two_digit_years_stay_two_digit_and_record_dates_read_as_the_record_has_them(date_pattern, lists):
    record = PatientRecord("5", dates=(dt.date(1950, 12, 3),))
    parsed = parse_date("12/03/1950", [], record.dates)  # month first: that is the date of birth
    assert (parsed.day, parsed.month) == (3, 12)
    text = "DOB 12/03/1950, seen 7/6/18"
    spans = union(PatternDetector.from_rules(RULES)(text, record))
    out = replacer(b"k", date_pattern, lists)(text, spans, record)
    assert re.fullmatch(r"DOB \d\d/\d\d/19\d\d, seen \d{1,2}/\d{1,2}/\d\d", out)


def test_years_alone_are_kept_when_configured(date_pattern, lists):
    record = PatientRecord("5")
    text = "s/p MI 1992, CABG 12/03/2019"
    spans = union(PatternDetector.from_rules(RULES)(text, record))
    keep = replacer(b"k", date_pattern, lists, ReplaceConfig(mode="surrogates", years="keep"))
    out = keep(text, spans, record)
    assert "1992" in out and "12/03/2019" not in out


def test_shift_range_is_configurable(date_pattern, lists):
    narrow = replacer(b"k", date_pattern, lists, ReplaceConfig(mode="surrogates", date_shift_min=10, date_shift_max=12))
    for pid in range(30):
        assert 10 <= narrow.shifts(PatientRecord(str(pid)))[0] <= 12
    with pytest.raises(ConfigError):
        ReplaceConfig(mode="surrogates", date_shift_min=0)
    with pytest.raises(ConfigError, match="replace.mode"):
        parse_config(_minimal_config() | {"replace": {"mode": "pseudonyms"}})


def _minimal_config() -> dict:
    return {
        "source": {"url": "sqlite://"},
        "patients": {"table": "p", "id": "id"},
        "notes": {"table": "n", "id": "id", "patient": "p", "text": "t"},
        "target": {"url": "sqlite://"},
    }


# --- identifiers, phones, ages ---------------------------------------------------------------------


def test_nric_check_letters_are_valid_and_surrogates_keep_the_shape(date_pattern, lists):
    assert [nric_check_letter(p, "1234567") for p in "STFG"] == ["D", "J", "N", "X"]
    surrogates = replacer(b"k", date_pattern, lists)
    detector = PatternDetector.from_rules(RULES)
    for pid in range(60):
        record = PatientRecord(str(pid), identifiers=("S1234567D",))
        for nric in ("S1234567D", "T0123456G", "F1234567N", "G1234567X", "s 1234567 d", "S-1234567-D"):
            text = f"NRIC {nric}."
            spans = [s for s in union(detector(text, record)) if s.category == "ID"]
            new = surrogates.surrogates(text, spans, record)[0]
            assert new != nric and len(new) == len(nric) and new[0] == nric[0]
            assert re.sub(r"\w", "", new) == re.sub(r"\w", "", nric)
            assert nric_checksum(re.sub(r"[\s-]", "", new)), new


def test_phones_keep_country_code_and_grouping_and_are_consistent(monkeypatch):
    pipe = pipeline(monkeypatch)
    found = {o: v for note in NOTES for c, o, v in pairs(pipe, note) if c == "PHONE"}
    full, local = found["+65 9123 4567"], found["9123 4567"]
    assert re.fullmatch(r"\+65 9\d{3} \d{4}", full) and re.fullmatch(r"9\d{3} \d{4}", local)
    assert full.endswith(local)  # the same number, written with and without its country code
    assert full != "+65 9123 4567"


def test_ages_over_89_become_90_plus(monkeypatch):
    found = [(o, v) for c, o, v in pairs(pipeline(monkeypatch), NOTES[2]) if c == "AGE"]
    assert found == [("92", "90+")]


# --- whole runs ------------------------------------------------------------------------------------


def _surrogate_config(path: Path) -> Path:
    path.write_text(path.read_text() + '\n[replace]\nmode = "surrogates"\n')
    return path


def test_a_run_without_the_secret_exits_2_and_writes_nothing(hospital, monkeypatch):
    monkeypatch.delenv("ANONYMIZER_SECRET", raising=False)
    config = _surrogate_config(hospital)
    result = CliRunner().invoke(app, ["run", "--config", str(config)])
    assert result.exit_code == 2
    assert "ANONYMIZER_SECRET" in result.output and result.output.count("\n") == 1
    assert not (hospital.parent / "target.db").exists()


@pytest.mark.parametrize("weak", ["a", "readme-example", "0123456789abcdef", "a" * 64, "ab" * 32])
def test_a_weak_secret_is_refused_with_how_to_make_one(hospital, monkeypatch, weak):
    monkeypatch.setenv("ANONYMIZER_SECRET", weak)
    result = CliRunner().invoke(app, ["run", "--config", str(_surrogate_config(hospital))])
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert "too weak" in result.output and "openssl rand -hex 32" in result.output
    assert len(weak) < 8 or weak not in result.output  # never echoed
    assert not (hospital.parent / "target.db").exists()


def test_audit_note_shows_the_surrogate_with_or_without_the_secret(hospital, monkeypatch):
    monkeypatch.setenv("ANONYMIZER_SECRET", SECRET_ONE)
    cfg = load_config(_surrogate_config(hospital))
    run(cfg)
    target = Target(cfg.target.url)
    view = audit.note_view(cfg, target, "10")
    assert view.replacements and None not in view.replacements
    assert all(r in view.anonymized_text for r in view.replacements)
    assert all(r != view.source_text[s[0] : s[1]] for r, s in zip(view.replacements, view.spans))
    monkeypatch.delenv("ANONYMIZER_SECRET")
    assert audit.note_view(cfg, target, "10").replacements == view.replacements  # read off the text
    assert list(audit.leaks(cfg, target)) == []
    result = CliRunner().invoke(app, ["audit", "note", "10", "--config", str(hospital)], env={"COLUMNS": "250"})
    assert result.exit_code == 0 and f"→ {view.replacements[0]}" in result.output


def test_sample_database_has_no_leaks_in_surrogate_mode_and_no_surrogate_equals_its_original(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("ANONYMIZER_SECRET", SECRET_ONE)
    cfg = load_config(ROOT / "sample_db" / "anonymizer.toml")
    cfg = dataclasses.replace(
        cfg,
        target=dataclasses.replace(cfg.target, url=f"sqlite:///{tmp_path}/target.db"),
        classifier=dataclasses.replace(cfg.classifier, enabled=False),
        replace=SURROGATES,
    )
    started = time.perf_counter()
    summary = run(cfg, limit=400)
    assert summary.done == 400 and summary.failed == 0
    target = Target(cfg.target.url)
    assert list(audit.leaks(cfg, target)) == []
    assert time.perf_counter() - started < 40
    # Every replacement differs from what it replaced (tags and kept values aside).
    with target.engine.connect() as conn:
        rows = conn.execute(sa.select(target.spans.c.note_id, target.spans.c.start, target.spans.c.end,
                                      target.spans.c.category, target.spans.c.detectors)).all()
        released = dict(conn.execute(sa.select(target.notes.c.note_id, target.notes.c.text)).all())
    notes = Source(cfg).notes_by_id(released)
    by_note: dict[str, list] = {}
    for row in rows:
        by_note.setdefault(row[0], []).append(row[1:])
    compared = 0
    for note_id, spans in by_note.items():
        merged = sorted((MergedSpan(s, e, c, tuple(d.split(","))) for s, e, c, d in spans), key=lambda m: m.start)
        for span, value in zip(merged, audit._align(notes[note_id].text, merged, released[note_id])):
            original = notes[note_id].text[span.start : span.end]
            if value is None or value == f"[{span.category}]" or (span.category == "AGE" and int(original) < 90):
                continue
            assert value.casefold() != original.casefold(), (original, value)
            compared += 1
    assert compared > 2800


# --- robustness ------------------------------------------------------------------------------------

PIECES = st.sampled_from(
    ["Tan", "tan", "O'Brien", " ", "/", "-", ".", "'", "3rd", "of", "March", "MAY", "2019", "19", "0", "12",
     "S1234567D", "+65", "9123", "@", "http://", "www.", "bin", "s/o", "Blk", "Avenue", "#05-12", "Mon", "\n", "é", "ß"]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(PIECES, max_size=12), st.lists(st.tuples(st.integers(0, 60), st.integers(1, 20),
       st.sampled_from(["PATIENT", "RELATIVE", "ID", "PHONE", "EMAIL", "URL", "DOCTOR", "NAME", "AGE", "DATE",
                        "HOSPITAL", "LOCATION"]), st.sampled_from(["regex:date_dmy_name", "record:name", "svm", "regex:year"])),
       max_size=5))
def test_any_span_of_any_text_gets_a_replacement_without_error(date_pattern, lists, pieces, raw):
    text = "".join(pieces)
    spans, end = [], 0
    for start, length, category, source in sorted(raw):
        start = max(start, end)
        if start + length > len(text):
            break
        spans.append(MergedSpan(start, start + length, category, (source,)))
        end = start + length
    record = PatientRecord("9", names=("O'Brien", "Tan"), relatives=("Siti binte Ali",), identifiers=("S1234567D",),
                           phones=("+65 9123 4567",), dates=(dt.date(2019, 3, 3),), addresses=("Blk 5 Avenue 3",))
    values = replacer(b"k", date_pattern, lists).surrogates(text, spans, record)
    assert len(values) == len(spans) and all(isinstance(v, str) and v for v in values)
