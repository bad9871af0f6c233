"""The review loop's data: marks, finished reviews, reviewed gold, import, the estimate and
training on reviews, against real targets (SQLite, PostgreSQL, MariaDB)."""

from __future__ import annotations

import gzip
import json
import os

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from anonymizer.cli import app
from anonymizer.config import load_config
from anonymizer.review import marks
from anonymizer.review.estimate import estimate, wilson
from anonymizer.review.gold import note_counts, reviewed_corpus, reviewed_gold, reviewed_notes
from anonymizer.run import run
from anonymizer.target import Target
from tests.conftest import NOTES, create_hospital
from tests.servers import ENGINES, execute, query, write_config

runner = CliRunner()
TEXT = {str(n["note_id"]): n["body"] for n in NOTES}


@pytest.fixture
def done(hospital):
    run(load_config(hospital))
    return hospital


def target_of(config) -> Target:
    return Target(load_config(config).target.url, create=False)


@pytest.mark.parametrize("kind", ENGINES)
def test_marks_are_stored_at_once_per_reviewer_and_undone(databases, tmp_path, kind):
    source, target_url = databases.url("sqlite", "src"), databases.url(kind, "dst")
    create_hospital(source)
    config = load_config(write_config(tmp_path / "anonymizer.toml", source, target_url))
    run(config)
    target = Target(target_url, create=False)
    text = TEXT["12"]  # "Mr Kumar stable. Ravi's brother visited on 3rd of March 2019."
    brother = (text.index("brother"), text.index("brother") + 7)

    first, created = marks.add_mark(target, "12", *brother, "RELATIVE", "missed", "ana", len(text))
    assert created and marks.add_mark(target, "12", *brother, "RELATIVE", "missed", "ana", len(text)) == (first, False)
    marks.add_mark(target, "12", *brother, "RELATIVE", "missed", "ben", len(text))  # a second reviewer: kept too
    [(start, end, category, _), *_] = marks.detections(target, ["12"])["12"]
    marks.add_mark(target, "12", start, end, category, "wrong", "ana", len(text))
    marks.add_mark(target, "12", start, end, "NAME", "category", "ana", len(text))  # a change of mind replaces it
    rows = query(target_url, "SELECT verdict, reviewer, category FROM review_spans ORDER BY review_id")
    assert rows == [("missed", "ana", "RELATIVE"), ("missed", "ben", "RELATIVE"), ("category", "ana", "NAME")]
    assert query(target_url, "SELECT COUNT(*) FROM review_spans WHERE marked_at IS NULL") == [(0,)]

    assert marks.undo(target, "12", "ana").verdict == "category"  # the latest of ana's, never ben's
    assert [m.reviewer for m in marks.marks(target, ["12"])["12"]] == ["ana", "ben"]
    with pytest.raises(ValueError, match="not inside the note"):
        marks.add_mark(target, "12", 0, len(text) + 1, "NAME", "missed", "ana", len(text))

    marks.accept(target, "12", "ana", text, sampled=True)
    marks.accept(target, "12", "ana", text, sampled=True)  # accepting again replaces
    marks.accept(target, "12", "ben", text, sampled=True)
    assert query(target_url, "SELECT reviewer, run_id FROM review_notes ORDER BY reviewer") == [("ana", 1), ("ben", 1)]
    [note] = reviewed_notes(config, target).notes
    assert note.reviewers == ("ana", "ben") and (*brother, "RELATIVE") in note.gold
    assert set(note.detections) <= set(note.gold)  # nobody marked a detection wrong


def test_reviewed_gold_drops_a_detection_only_when_every_reviewer_marked_it_wrong():
    def mark(start, end, category, verdict, reviewer):
        return marks.Mark(0, "1", start, end, category, verdict, reviewer, None)

    rows = [mark(0, 4, "PATIENT", "detected", r) for r in ("ana", "ben")] + [mark(10, 14, "DATE", "detected", r) for r in ("ana", "ben")]
    rows += [mark(0, 4, "PATIENT", "wrong", "ana"), mark(10, 14, "DATE", "wrong", "ana"), mark(10, 14, "DATE", "wrong", "ben")]
    rows += [mark(20, 25, "DOCTOR", "missed", "ben"), mark(0, 4, "NAME", "category", "ben")]
    detected, gold = reviewed_gold(rows, ["ana", "ben"])
    assert detected == ((0, 4, "PATIENT"), (10, 14, "DATE"))
    assert gold == ((0, 4, "NAME"), (20, 25, "DOCTOR"))
    assert reviewed_gold(rows, ["ana"])[1] == ((20, 25, "DOCTOR"),)


def test_import_review_takes_spans_as_text_never_duplicates_and_counts_as_reviewed(done, tmp_path):
    sample = tmp_path / "sample.jsonl"
    assert runner.invoke(app, ["audit", "sample", "--n", "5", "--seed", "1", "--out", str(sample), "--config", str(done)]).exit_code == 0
    assert oct(os.stat(sample).st_mode & 0o777) == "0o600"
    items = {i["note_id"]: i for i in map(json.loads, sample.read_text().splitlines())}
    items["12"]["missed"] = [{"text": "brother", "category": "RELATIVE"}]
    items["11"]["wrong"] = [items["11"]["detections"][0]]
    sample.write_text("".join(json.dumps(i) + "\n" for i in items.values()))
    for new in (2, 0):  # importing again stores nothing new
        result = runner.invoke(app, ["audit", "import-review", str(sample), "--reviewer", "ana", "--config", str(done)])
        assert result.exit_code == 0, result.output
        assert f"imported 1 missed, 1 wrong and 0 recategorised span(s) ({new} new)" in result.stdout
    url = load_config(done).target.url
    assert query(url, "SELECT start, reviewer FROM review_spans WHERE verdict = 'missed'") == [(TEXT["12"].index("brother"), "ana")]
    assert query(url, "SELECT COUNT(*) FROM review_notes WHERE sampled") == [(5,)]

    items["12"]["missed"] = [{"text": "nowhere in it"}]
    sample.write_text(json.dumps(items["12"]) + "\n")
    result = runner.invoke(app, ["audit", "import-review", str(sample), "--config", str(done)])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {sample}:1: not a review line (a missed span's text is not in the note)"


def test_a_note_edited_or_anonymized_again_since_its_review(done):
    config, target = load_config(done), target_of(done)
    for note_id in ("10", "12"):
        marks.accept(target, note_id, "ana", TEXT[note_id], sampled=True)
    source = str(config.source.url)
    execute(source, "UPDATE notes SET body = 'Pt seen again' WHERE note_id = 10")
    found = reviewed_notes(config, target)
    assert [n.note_id for n in found.notes] == ["12"] and found.changed == ["10"]
    run(config)  # 10 changed: anonymized again; 12 skipped, so its review still describes the release
    assert [n.note_id for n in reviewed_notes(config, target, release=True).notes] == ["12"]
    execute(load_config(done).target.url, "UPDATE anonymized_notes SET run_id = 9 WHERE note_id = '12'")
    release = reviewed_notes(config, target, release=True)
    assert release.notes == [] and release.rerun == ["12"]
    assert [n.note_id for n in reviewed_notes(config, target).notes] == ["12"]  # still a training note


def test_the_interval_widens_with_the_design_effect_and_covers_zero_misses():
    clustered = estimate([(10, 0)] * 90 + [(20, 3)] * 10)  # the misses bunched in a few notes
    assert clustered.design_effect > 1.5
    assert clustered.interval[0] < clustered.naive_interval[0] and clustered.interval[1] > clustered.naive_interval[1]
    assert clustered.interval[0] < clustered.recall < clustered.interval[1]
    assert clustered.residual_per_1000_notes == pytest.approx(300.0)
    perfect = estimate([(10, 0)] * 100)
    assert perfect.recall == 1.0 and perfect.interval[1] == 1.0 and 0.99 < perfect.interval[0] < 1.0
    assert perfect.residual_interval[0] == 0.0 < perfect.residual_interval[1]
    assert wilson(50, 100)[0] == pytest.approx(0.4038, abs=1e-4)
    with pytest.raises(ValueError):
        estimate([(0, 0)])


def test_audit_estimate_reads_the_reviewed_random_sample(done):
    assert runner.invoke(app, ["audit", "estimate", "--config", str(done)]).exit_code == 2
    target = target_of(done)
    text = TEXT["12"]
    marks.add_mark(target, "12", text.index("brother"), text.index("brother") + 7, "RELATIVE", "missed", "ana", len(text))
    for note_id in ("10", "11", "12"):
        marks.accept(target, note_id, "ana", TEXT[note_id], sampled=True)
    result = runner.invoke(app, ["audit", "estimate", "--json", "--config", str(done)])
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert found["notes"] == 3 and found["missed_tokens"] == 1
    low, high = found["interval"]
    assert low < found["recall"] < high <= 1
    notes = reviewed_notes(load_config(done), target, release=True).notes
    assert sum(g for g, _ in note_counts(notes)) == found["phi_tokens"]
    text_out = runner.invoke(app, ["audit", "estimate", "--config", str(done)]).stdout
    assert "95% confidence interval" in text_out and "PHI tokens left per 1,000 notes" in text_out


def test_train_learns_from_the_reviewed_notes(done, tmp_path):
    target = target_of(done)
    text = TEXT["12"]
    marks.add_mark(target, "12", text.index("brother"), text.index("brother") + 7, "RELATIVE", "missed", "ana", len(text))
    for note_id in ("10", "11", "12"):
        marks.accept(target, note_id, "ana", TEXT[note_id], sampled=False)
    corpus = reviewed_corpus(load_config(done), target)
    assert {n.note_id for n in corpus.notes} == {"10", "11", "12"} and corpus.lists["DOCTOR"] == ["Quiley"]
    assert corpus.records["1"].names == ("Marisette", "Vrabel")

    model = tmp_path / "m.json.gz"
    result = runner.invoke(app, ["train", "--reviews", str(done), "--out", str(model), "--augment", "0", "--json"])
    assert result.exit_code == 0, result.output
    card = json.loads(result.stdout)
    assert card["corpora"][0]["notes"] == 3 and card["phi_tokens"] > 0
    assert json.loads(gzip.decompress(model.read_bytes()))["heads"]
    empty = tmp_path / "empty.toml"
    empty.write_text(done.read_text().replace("target.db", "other.db"))
    Target(load_config(empty).target.url)
    result = runner.invoke(app, ["train", "--reviews", str(empty), "--out", str(model)])
    assert result.exit_code == 2 and "no reviewed note in its target" in result.stderr
    assert runner.invoke(app, ["train", "--out", str(model)]).exit_code == 2


def test_the_migration_keeps_imported_marks(tmp_path):
    """A target of the version before: its imported marks keep their time, without a reviewer."""
    from alembic import command

    from anonymizer.target import VERSION_TABLE, _alembic_config

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = sa.create_engine(url)
    cfg = _alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0004")
        conn.execute(sa.text("INSERT INTO review_spans (note_id, start, \"end\", category, verdict, imported_at) "
                             "VALUES ('1', 0, 2, 'NAME', 'missed', '2026-11-01 10:00:00')"))
    Target(url)  # upgraded
    assert query(url, "SELECT reviewer, marked_at FROM review_spans") == [(None, "2026-11-01 10:00:00")]
    assert query(url, f"SELECT version_num FROM {VERSION_TABLE}") == [("0005",)]
    engine.dispose()
