"""A hospital's own folders of rules ([rules] extra) and `anonymizer rules`, which lists them all."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from anonymizer.cli import app
from anonymizer.config import load_config
from anonymizer.pipeline import build_pipeline
from anonymizer.record import empty_record
from anonymizer.run import run
from anonymizer.settings import ClassifierConfig, ConfigError, DetectorsConfig
from tests.conftest import CONFIG, create_hospital

MRN = "KH/2019/004417"  # a hospital's own record number: no packaged rule knows this shape
NOTE = f"Referred from clinic, hospital no {MRN}. Seen by Dr. Quiley."
HOSPITAL_PATTERNS = r"""
[[pattern]]
name = "hospital_mrn"
category = "ID"
regex = '\bKH/(?:19|20)\d\d/\d{6}\b'
requires = '\d{6}'
"""


def hospital_with_rules(tmp_path: Path, patterns: str = HOSPITAL_PATTERNS) -> Path:
    """A source with one note holding MRN, and a configuration naming a folder of extra rules
    beside it (a relative path, read from the configuration file's folder)."""
    source, target = tmp_path / "hospital.db", tmp_path / "target.db"
    create_hospital(f"sqlite:///{source}", notes=[dict(note_id=20, patient_id=2, body=NOTE)])
    (tmp_path / "hospital_rules").mkdir()
    (tmp_path / "hospital_rules" / "patterns.toml").write_text(patterns, encoding="utf-8")
    config = tmp_path / "anonymizer.toml"
    config.write_text(CONFIG.format(source=source, target=target) + '\n[rules]\nextra = ["hospital_rules/"]\n', encoding="utf-8")
    return config


def output(config: Path) -> dict[str, str]:
    engine = sa.create_engine(load_config(config).target.url)
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT note_id, text FROM anonymized_notes")).all()
    engine.dispose()
    return dict(rows)


def test_an_id_format_from_a_folder_outside_the_package_is_found_by_a_run(tmp_path: Path) -> None:
    config = hospital_with_rules(tmp_path)
    assert load_config(config).rules.extra == (str(tmp_path / "hospital_rules"),)
    summary = run(load_config(config))
    assert summary.done == 1 and summary.failed == 0
    text = output(config)["20"]
    assert MRN not in text and "[ID]" in text
    # without the folder the packaged rules leave it
    plain = build_pipeline(DetectorsConfig(), {}, ClassifierConfig(enabled=False))
    assert not any(NOTE[s.start : s.end] == MRN for s in plain.rule_spans(NOTE, empty_record("2")))


def test_a_change_to_an_extra_file_reprocesses_the_notes(tmp_path: Path) -> None:
    config = hospital_with_rules(tmp_path)
    run(load_config(config))
    assert run(load_config(config)).skipped == 1
    (tmp_path / "hospital_rules" / "patterns.toml").write_text(HOSPITAL_PATTERNS.replace("{6}", "{5,6}"), encoding="utf-8")
    assert run(load_config(config)).done == 1


def test_the_digest_covers_the_extra_files_and_is_unchanged_without_them(tmp_path: Path) -> None:
    folder = tmp_path / "extra"
    folder.mkdir()
    base = build_pipeline(DetectorsConfig(), {}, ClassifierConfig(enabled=False)).digest
    assert build_pipeline(DetectorsConfig(), {}, ClassifierConfig(enabled=False), extra_rules=[folder]).digest == base
    (folder / "patterns.toml").write_text(HOSPITAL_PATTERNS, encoding="utf-8")
    assert build_pipeline(DetectorsConfig(), {}, ClassifierConfig(enabled=False), extra_rules=[folder]).digest != base


def test_the_digest_covers_the_packaged_word_lists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A changed word list (the vetoes' English or clinical words) changes what a run removes, so a
    rerun must redo the notes."""
    import shutil

    from anonymizer import pipeline
    from anonymizer.vocabulary import CLASSIFIER_DATA

    base = build_pipeline(DetectorsConfig(), {}, ClassifierConfig(enabled=False)).digest
    copy = tmp_path / "data"
    shutil.copytree(CLASSIFIER_DATA, copy)
    monkeypatch.setattr(pipeline, "CLASSIFIER_DATA", copy)
    assert build_pipeline(DetectorsConfig(), {}, ClassifierConfig(enabled=False)).digest == base
    with (copy / "clinical.txt").open("a", encoding="utf-8") as f:
        f.write("zzword\n")
    assert build_pipeline(DetectorsConfig(), {}, ClassifierConfig(enabled=False)).digest != base


@pytest.mark.parametrize(
    ("filename", "extra", "kind"),
    [
        ("patterns.toml", '[[pattern]]\nname = "nric"\ncategory = "ID"\nregex = "x"\n', "pattern 'nric'"),
        ("context.toml", '[[exception]]\nname = "clock"\napplies_to = ["DATE"]\nafter = "x"\n', "exception 'clock'"),
        ("context.toml", '[components]\nunit = "mg"\n', "component 'unit'"),
    ],
)
def test_a_name_already_defined_is_a_one_line_error_naming_both_files(tmp_path: Path, filename: str, extra: str, kind: str) -> None:
    (tmp_path / filename).write_text(extra, encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        build_pipeline(DetectorsConfig(), {}, ClassifierConfig(enabled=False), extra_rules=[tmp_path])
    message = str(error.value)
    assert "\n" not in message and f"{kind} is defined twice" in message
    assert str(tmp_path / filename) in message and (
        "patterns.toml" in message.split(" and ")[0] or "context.toml" in message.split(" and ")[0]
    )


def test_a_duplicate_in_a_run_stops_it_with_exit_2(tmp_path: Path) -> None:
    config = hospital_with_rules(tmp_path, HOSPITAL_PATTERNS.replace("hospital_mrn", "email"))
    result = CliRunner().invoke(app, ["run", "--config", str(config)])
    assert result.exit_code == 2 and "pattern 'email' is defined twice" in result.output


def test_honorifics_and_word_lists_are_added_from_an_extra_folder(tmp_path: Path) -> None:
    (tmp_path / "honorifics.toml").write_text(
        'stop_words = ["ward"]\nrole_titles = ["sho"]\n[[honorific]]\nname = "sister"\ncategory = "NAME"\nstrong = true\n'
    )
    (tmp_path / "name_connectors.txt").write_text("anak\n")
    pipeline = build_pipeline(DetectorsConfig(disabled=("record",)), {}, ClassifierConfig(enabled=False), extra_rules=[tmp_path])
    text = "Sister Lim anak Jugah reviewed. Sister ward round. SHO Brennan saw pt; SHO Review at 10."
    found = {(text[s.start : s.end], s.category) for s in pipeline.rule_spans(text, empty_record("1")) if s.detector == "honorific"}
    assert found == {("Lim anak Jugah", "NAME"), ("Brennan", "DOCTOR")}
    (tmp_path / "honorifics.toml").write_text('[[honorific]]\nname = "Mr"\ncategory = "NAME"\nstrong = true\n')
    with pytest.raises(ConfigError, match="honorific 'mr' is defined twice: in .*honorifics.toml and in"):
        build_pipeline(DetectorsConfig(), {}, ClassifierConfig(enabled=False), extra_rules=[tmp_path])


def test_an_extra_folder_must_exist_and_hold_only_rule_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is not a folder"):
        build_pipeline(DetectorsConfig(), {}, ClassifierConfig(enabled=False), extra_rules=[tmp_path / "missing"])
    (tmp_path / "pattern.toml").write_text("")  # misspelt: it would never be read
    with pytest.raises(ConfigError, match="pattern.toml is not a rule file"):
        build_pipeline(DetectorsConfig(), {}, ClassifierConfig(enabled=False), extra_rules=[tmp_path])


# --- anonymizer rules ------------------------------------------------------------------------------


def test_rules_lists_every_detector_and_what_finds_phone_numbers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no ./anonymizer.toml: the packaged rules
    monkeypatch.delenv("ANONYMIZER_CONFIG", raising=False)
    result = CliRunner().invoke(app, ["rules"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    for name in ("record", "honorific", "regex", "phones", "lists", "places", "svm"):
        assert any(line.startswith(f"{name}: ") for line in lines), name
    phone_local = next(line for line in lines if line.split()[:1] == ["phone_local"])
    assert "PHONE" in phone_local and "validate=not_a_range" in phone_local and "exceptions=quantity" in phone_local
    assert any(line.split()[:2] == ["exception", "quantity"] and "phone_local" in line for line in lines)


def test_rules_json_includes_a_hospitals_own_rules(tmp_path: Path) -> None:
    config = hospital_with_rules(tmp_path)
    result = CliRunner().invoke(app, ["rules", "--json", "--config", str(config)])
    assert result.exit_code == 0, result.output
    described = {item["detector"]: item for item in json.loads(result.stdout)}
    assert list(described) == ["record", "honorific", "regex", "phones", "lists", "places", "svm"]
    rules = {rule["name"]: rule for rule in described["regex"]["rules"]}
    assert rules["hospital_mrn"]["category"] == "ID"
    assert rules["hospital_mrn"]["file"] == str(tmp_path / "hospital_rules" / "patterns.toml")
    assert rules["nric"]["validator"] == "nric_checksum"
    assert rules["phone_local"]["exceptions"] == ["quantity"]
    assert {"name": "phones", "category": "PHONE", "columns": ["phone"]} in described["record"]["rules"]
    assert described["svm"]["enabled"] is False  # [classifier] enabled = false


def test_rules_refuses_a_bad_configuration_in_one_line(tmp_path: Path) -> None:
    config = hospital_with_rules(tmp_path, HOSPITAL_PATTERNS.replace("hospital_mrn", "nric"))
    result = CliRunner().invoke(app, ["rules", "--config", str(config)])
    assert result.exit_code == 2 and "pattern 'nric' is defined twice" in result.output


@pytest.mark.parametrize(
    ("filename", "text", "message"),
    [
        ("patterns.toml", "[[pattern]\n", "patterns.toml: not valid TOML"),
        ("patterns.toml", '[[pattern]]\nname = "x"\ncategory = "ID"\n', "block 'x' lacks regex"),
        ("honorifics.toml", "max_tokens = 9\n", "unknown keys ['max_tokens']"),
    ],
)
def test_a_broken_extra_file_is_a_one_line_error_naming_it(tmp_path: Path, filename: str, text: str, message: str) -> None:
    (tmp_path / filename).write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=re.escape(message)) as error:
        build_pipeline(DetectorsConfig(), {}, ClassifierConfig(enabled=False), extra_rules=[tmp_path])
    assert "\n" not in str(error.value)


def test_the_record_fields_are_described_with_the_categories_their_detector_gives():
    from anonymizer.detectors.patterns import PatternDetector
    from anonymizer.record import PatientRecord
    from anonymizer.registry import record_detectors
    from anonymizer.resources import data_dir
    from anonymizer.rules import RECORD_FIELDS

    rules = data_dir("rules")
    detectors = record_detectors(rules, 0.33, PatternDetector.from_rules(rules).date_pattern)
    record = PatientRecord("p1", names=("Marisette Vrabel",), relatives=("Kumaravel Pillai",), identifiers=("S1234567D",))
    text = "Marisette seen with Kumaravel, NRIC S1234567D"
    found = {text[s.start : s.end]: s.category for d in detectors for s in d(text, record)}
    assert found["Marisette"] == RECORD_FIELDS["names"]
    assert found["Kumaravel"] == RECORD_FIELDS["relatives"]
    assert found["S1234567D"] == RECORD_FIELDS["identifiers"]
