import pytest

from anonymizer.config import load_config, parse_config
from anonymizer.settings import ConfigError
from anonymizer.source import Source

BASE = {
    "source": {"url": "sqlite:///x.db"},
    "patients": {"table": "patients", "id": "patient_id", "names": ["given_name"]},
    "notes": {"table": "notes", "id": "note_id", "patient": "patient_id", "text": "body"},
    "target": {"url": "sqlite:///y.db"},
}


def with_(section, **values):
    data = {k: dict(v) if isinstance(v, dict) else v for k, v in BASE.items()}
    data.setdefault(section, {}).update(values)
    return data


@pytest.mark.parametrize(
    "data, message",
    [
        ({**BASE, "sauce": {}}, "unknown key 'sauce'"),
        (with_("patients", nmes=["x"]), "unknown key 'patients.nmes'"),
        (with_("detectors", regex_timeout=5.0), "unknown key 'detectors.regex_timeout' (now 'detectors.note_timeout')"),
        (with_("patients", names="given_name"), "patients.names: expected a list"),
        (with_("detectors", name_threshold="high"), "detectors.name_threshold: expected float, got str"),
        (with_("classifier", enabled="yes"), "classifier.enabled: expected bool, got str"),
        ({k: v for k, v in BASE.items() if k != "notes"}, "missing required key 'notes'"),
        ({**BASE, "lists": [{"category": "DOCTOR"}]}, "give either file, or table and column"),
        ({**BASE, "lists": [{"category": "VILLAIN", "file": "x"}]}, "unknown category 'VILLAIN'"),
        (with_("source", url="postgresql://${NO_SUCH_VARIABLE_HERE}/db"), "NO_SUCH_VARIABLE_HERE is not set"),
    ],
)
def test_bad_configuration_is_one_clear_line(data, message):
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_environment_variables_expand_in_urls(monkeypatch):
    monkeypatch.setenv("DB_PASSWORD", "s3cret")
    config = parse_config(with_("source", url="postgresql://u:${DB_PASSWORD}@h/db"))
    assert config.source.url == "postgresql://u:s3cret@h/db"


def test_file_is_found_by_flag_then_environment_then_cwd(tmp_path, monkeypatch, hospital):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ANONYMIZER_CONFIG", raising=False)
    assert load_config().notes.text == "body"  # ./anonymizer.toml (the fixture wrote it here)
    other = tmp_path / "other.toml"
    other.write_text(hospital.read_text().replace('text = "body"', 'text = "other"'))
    monkeypatch.setenv("ANONYMIZER_CONFIG", str(other))
    assert load_config().notes.text == "other"
    assert load_config(hospital).notes.text == "body"
    with pytest.raises(ConfigError, match="configuration file not found"):
        load_config(tmp_path / "missing.toml")


@pytest.mark.parametrize(
    "old, new, message",
    [
        ('table = "notes"', 'table = "notez"', "notes.table: table 'notez' not found"),
        ('text = "body"', 'text = "bodyy"', "notes.text: column 'bodyy' not found in table 'notes'"),
        ('phones = ["phone"]', 'phones = ["fax"]', "patients.phones[0]: column 'fax' not found"),
        ('column = "full_name"', 'column = "name"', "lists[0].column: column 'name' not found"),
    ],
)
def test_schema_mismatch_names_the_table_or_column(hospital, old, new, message):
    hospital.write_text(hospital.read_text().replace(old, new))
    with pytest.raises(ConfigError) as info:
        Source(load_config(hospital))
    assert message in str(info.value)


def test_an_unknown_detector_name_is_refused_before_anything_is_built():
    from anonymizer.pipeline import build_pipeline
    from anonymizer.settings import ClassifierConfig, DetectorsConfig

    with pytest.raises(ConfigError, match="detectors.disabled: unknown detector 'regexes'"):
        build_pipeline(DetectorsConfig(disabled=("regexes",)), {}, ClassifierConfig(enabled=False))


@pytest.mark.parametrize(
    "section, key, value",
    [
        ("detectors", "name_threshold", "0.0"),  # would turn name matching off
        ("detectors", "name_threshold", "1.0"),
        ("detectors", "name_threshold", "-0.5"),
        ("detectors", "note_timeout", "0"),  # would fail every note
        ("detectors", "note_timeout", "-1.0"),
        ("detectors", "note_timeout", "inf"),
        ("detectors", "note_timeout", "nan"),
        ("classifier", "threshold", "nan"),
        ("classifier", "threshold", "-inf"),
        ("run", "batch_size", "0"),  # would end "done" with no note
        ("run", "batch_size", "-5"),
        ("replace", "date_shift_max", "1000000000"),
    ],
)
def test_out_of_range_values_are_refused_at_load_with_one_line(tmp_path, section, key, value):
    path = tmp_path / "anonymizer.toml"
    path.write_text(
        '[source]\nurl = "sqlite:///x.db"\n[patients]\ntable = "p"\nid = "i"\n'
        '[notes]\ntable = "n"\nid = "i"\npatient = "p"\ntext = "t"\n[target]\nurl = "sqlite:///y.db"\n'
        f"[{section}]\n{key} = {value}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{section}.{key}: ") and "out of range" in str(info.value)
    assert "\n" not in str(info.value)


def test_relative_paths_resolve_from_the_given_directory(tmp_path):
    data = with_("classifier", model="models/ours.json.gz")
    data["lists"] = [{"category": "HOSPITAL", "file": "lists/h.txt"}, {"category": "LOCATION", "file": "/abs/places.txt"}]
    config = parse_config(data, base=tmp_path)
    assert config.source.url == f"sqlite:///{tmp_path / 'x.db'}"
    assert config.classifier.model == str(tmp_path / "models" / "ours.json.gz")
    assert [item.file for item in config.lists] == [str(tmp_path / "lists" / "h.txt"), "/abs/places.txt"]
    for url, expected in [
        ("sqlite:////abs/y.db", "sqlite:////abs/y.db"),
        ("sqlite://", "sqlite://"),
        ("sqlite:///:memory:", "sqlite:///:memory:"),
        ("sqlite:///file:y.db?mode=ro&uri=true", f"sqlite:///file:{tmp_path / 'y.db'}?mode=ro&uri=true"),
        ("postgresql+psycopg://u@h/db", "postgresql+psycopg://u@h/db"),
    ]:
        assert parse_config(with_("target", url=url), base=tmp_path).target.url == expected
    assert parse_config(BASE).source.url == "sqlite:///x.db"  # no base: as written
