"""Audit commands against a real SQLite source and target."""

import json

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from anonymizer.cli import app
from anonymizer.config import load_config
from anonymizer.run import run
from anonymizer.target import Target

runner = CliRunner()


@pytest.fixture
def done(hospital):
    """The fixture hospital, anonymized once."""
    run(load_config(hospital))
    return hospital


def set_target_text(config_path, note_id, text):
    engine = sa.create_engine(load_config(config_path).target.url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE anonymized_notes SET text = :t WHERE note_id = :n"), dict(t=text, n=note_id))
    engine.dispose()


def test_leaks_clean_target_exits_0(done):
    result = runner.invoke(app, ["audit", "leaks", "--config", str(done)])
    assert result.exit_code == 0, result.output


def test_planted_leak_is_found_with_exit_1_and_no_values_unless_asked(done):
    set_target_text(done, "11", "[PATIENT] Marisete, NRIC s 1234567 d, call +65-9123-4567, born 12 Mar 1950")
    result = runner.invoke(app, ["audit", "leaks", "--json", "--config", str(done)])
    assert result.exit_code == 1
    findings = json.loads(result.stdout)
    assert {f["field"] for f in findings} >= {"name", "identifier", "phone", "date"}
    assert all(f["note_id"] == "11" and "value" not in f for f in findings)
    shown = runner.invoke(app, ["audit", "leaks", "--show-values", "--config", str(done)])
    assert "Marisete" in shown.stdout


def test_tags_themselves_are_not_leaks(done):
    # A patient whose name is close to a tag word must not be "found" in the tag.
    set_target_text(done, "11", "[PATIENT] [PATIENT] [DATE]")
    assert runner.invoke(app, ["audit", "leaks", "--config", str(done)]).exit_code == 0


def test_summary_counts_categories_detectors_and_silent_notes(done):
    result = runner.invoke(app, ["audit", "summary", "--json", "--config", str(done)])
    assert result.exit_code == 0, result.output
    [report] = json.loads(result.stdout)
    assert report["notes_done"] == 5 and report["notes_failed"] == 0
    assert report["spans_by_category"]["PATIENT"] >= 3
    assert report["spans_by_detector"]["record"] >= report["spans_only_by"]["record"] > 0
    assert report["notes_without_detection"] == 1  # the empty note
    assert runner.invoke(app, ["audit", "summary", "--run", "99", "--config", str(done)]).exit_code == 2


def test_note_view_shows_detections_beside_the_anonymized_text(done):
    result = runner.invoke(app, ["audit", "note", "10", "--config", str(done)])
    assert result.exit_code == 0, result.output
    assert "PATIENT: record:name" in result.stdout and "[PATIENT]" in result.stdout
    assert runner.invoke(app, ["audit", "note", "999", "--config", str(done)]).exit_code == 2


def test_sample_is_reproducible_and_review_imports(done, tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path in (first, second):
        assert runner.invoke(app, ["audit", "sample", "--n", "3", "--seed", "7", "--out", str(path), "--config", str(done)]).exit_code == 0
    assert first.read_text() == second.read_text()
    items = [json.loads(line) for line in first.read_text().splitlines()]
    assert len(items) == 3 and all("text" in i and "detections" in i for i in items)
    items[0]["missed"] = [{"start": 0, "end": 2, "category": "NAME"}]
    if items[0]["detections"]:
        items[0]["wrong"] = [items[0]["detections"][0]]
    first.write_text("".join(json.dumps(i) + "\n" for i in items))
    result = runner.invoke(app, ["audit", "import-review", str(first), "--config", str(done)])
    assert result.exit_code == 0 and "imported 1 missed" in result.stdout
    first.write_text('{"note_id": 1, "text": "ab", "missed": [{"start": 0, "end": 9}]}\n')
    assert runner.invoke(app, ["audit", "import-review", str(first), "--config", str(done)]).exit_code == 2


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"note_id": 1, "text": "ab"}\n[1, 2]\n'.encode(), "b.jsonl:2: not a review line (not a JSON object)"),
        ('{"note_id": 1, "text": "Jos\u00e9"}\n'.encode("latin-1"), "b.jsonl: line 1 is not UTF-8 text"),
    ],
    ids=["not-an-object", "latin-1"],
)
def test_a_review_file_that_is_not_review_lines_is_one_error_line(done, tmp_path, content, message):
    (tmp_path / "b.jsonl").write_bytes(content)
    result = runner.invoke(app, ["audit", "import-review", str(tmp_path / "b.jsonl"), "--config", str(done)])
    assert result.exit_code == 2 and message in result.stderr and result.stderr.count("\n") == 1


def test_the_gate_keeps_the_shipped_name_threshold_when_the_run_lowers_it(done):
    # A run configured with a stricter name threshold must not also narrow the gate's variant matching.
    done.write_text(done.read_text() + "\n[detectors]\nname_threshold = 0.05\n")
    set_target_text(done, "11", "[PATIENT] Marisete c/o vomiting")
    result = runner.invoke(app, ["audit", "leaks", "--json", "--config", str(done)])
    assert result.exit_code == 1
    assert "names checked with threshold 0.33 (the shipped default), not the configured 0.05" in result.stderr
    assert [f["field"] for f in json.loads(result.stdout)] == ["name"]


def test_the_gate_says_how_many_notes_it_scanned(done):
    result = runner.invoke(app, ["audit", "leaks", "--json", "--config", str(done)])
    assert result.exit_code == 0 and json.loads(result.stdout) == []
    assert "scanned 5 notes: 0 finding(s)" in result.stderr and "threshold" not in result.stderr


def test_a_gate_with_no_note_to_scan_fails(hospital):
    Target(load_config(hospital).target.url)  # created and migrated, never run
    result = runner.invoke(app, ["audit", "leaks", "--config", str(hospital)])
    assert result.exit_code == 2
    assert result.stderr == "error: no anonymized notes in the target: nothing to check\n"
