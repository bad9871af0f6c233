"""The rules a run reads: the packaged folder, then a hospital's own folders (``[rules] extra``).

A hospital adds its ID formats, titles, context exceptions and word lists without touching the
install: a folder of its own holding any of the files below, named in the configuration::

    [rules]
    extra = ["hospital_rules/"]      # relative to the configuration file

Each file adds to the packaged one of the same name, read after it: ``patterns.toml``,
``dates.toml`` and ``context.toml`` their components, ``[[pattern]]`` and ``[[exception]]``
blocks (anonymizer.detectors.pattern_rules), ``honorifics.toml`` its ``[[honorific]]`` blocks,
``role_titles``, ``contact_cues``, ``given_name_cues``, ``verbs_after_name`` and ``stop_words``,
``common_words.txt`` and ``name_connectors.txt`` their words.  A name defined twice is an error
naming both files; any other ``.toml`` or ``.txt`` in the folder is an error too, so a misspelt
file name cannot leave a hospital's rules silently unread.  The run's pipeline digest covers the
extra files: changing one reprocesses the notes.

:func:`describe` lists what the rules hold, detector by detector (``anonymizer rules``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from anonymizer.settings import ConfigError

# The files an extra folder may hold, each adding to the packaged file of the same name.
EXTRA_FILES = ("patterns.toml", "dates.toml", "context.toml", "honorifics.toml", "common_words.txt", "name_connectors.txt")


def extra_folders(folders: Iterable[str | Path]) -> tuple[Path, ...]:
    """The folders of ``[rules] extra`` as paths, each checked to be a folder of known files."""
    checked = []
    for folder in map(Path, folders):
        if not folder.is_dir():
            raise ConfigError(f"rules.extra: {folder} is not a folder")
        unknown = sorted(p.name for p in folder.iterdir() if p.suffix in (".toml", ".txt") and p.name not in EXTRA_FILES)
        if unknown:
            raise ConfigError(f"rules.extra: {folder / unknown[0]} is not a rule file (one of {', '.join(EXTRA_FILES)})")
        if folder.resolve() in {f.resolve() for f in checked}:
            raise ConfigError(f"rules.extra: {folder} is named twice")
        checked.append(folder)
    return tuple(checked)


def extra_files(folders: Sequence[Path]) -> list[Path]:
    """The rule files of the extra folders, in the order they are read (for the pipeline's digest)."""
    return [folder / name for folder in folders for name in EXTRA_FILES if (folder / name).is_file()]


def describe(
    detectors: Any = None,
    extra: Sequence[Path] = (),
    lists: Sequence[Any] = (),
    patients: Any = None,
    classifier: Any = None,
    registry: Any = None,
) -> list[dict[str, Any]]:
    """Each detector of the catalogue with what finds it: its rules and their categories,
    validators and context exceptions, from the packaged rules and the `extra` folders.

    The configuration's parts (DetectorsConfig, [[lists]], [patients], [classifier]) are optional:
    without them the defaults.  Nothing is read from a database and no model is loaded."""
    from anonymizer.detectors.honorifics import HonorificDetector
    from anonymizer.detectors.patterns import PatternDetector
    from anonymizer.registry import DETECTORS
    from anonymizer.resources import data_dir
    from anonymizer.settings import ClassifierConfig, DetectorsConfig

    detectors = DetectorsConfig() if detectors is None else detectors
    classifier = ClassifierConfig() if classifier is None else classifier
    registry = DETECTORS if registry is None else registry
    rules_dir = data_dir("rules")
    described = []
    for entry in registry:
        item: dict[str, Any] = {
            "detector": entry.name,
            "stage": entry.stage,
            "enabled": entry.name not in detectors.disabled and (entry.name != "svm" or classifier.enabled),
            "finds": entry.finds,
            "rules": [],
        }
        if entry.name == "regex":
            patterns = PatternDetector.from_rules(rules_dir, extra=extra)
            item["rules"] = [
                {
                    "name": rule.name,
                    "category": rule.category,
                    "validator": getattr(rule.validate, "__name__", None),
                    "exceptions": [e.name for e in rule.exceptions],
                    "enabled": rule.name not in detectors.disabled_patterns,
                    "file": rule.origin,
                }
                for rule in patterns.rules
            ]
            unique = {e.name: e for rule in patterns.rules for e in rule.exceptions}
            item["exceptions"] = [{"name": e.name, "applies_to": sorted(e.applies_to), "file": e.origin} for e in unique.values()]
        elif entry.name == "honorific":
            titles = HonorificDetector.from_rules(rules_dir, extra).honorifics
            item["rules"] = [{"name": h.name, "category": h.category, "strong": h.strong, "file": h.origin} for h in titles]
        elif entry.name == "record" and patients is not None:
            item["rules"] = [
                {"name": field, "category": RECORD_FIELDS[field], "columns": list(getattr(patients, field))}
                for field in RECORD_FIELDS if getattr(patients, field)
            ]
        elif entry.name == "lists":
            item["rules"] = [
                {
                    "name": item_list.category.lower(),
                    "category": item_list.category,
                    "from": item_list.file or f"{item_list.table}.{item_list.column}",
                }
                for item_list in lists
            ]
        elif entry.name == "svm":
            item["rules"] = [{"name": "model", "category": "any", "from": classifier.model or "the shipped model"}]
        described.append(item)
    return described


# The record's fields (config [patients]) and the category of what they find.
RECORD_FIELDS = {
    "names": "PATIENT",
    "relatives": "RELATIVE",
    "identifiers": "ID",
    "phones": "PHONE",
    "dates": "DATE",
    "addresses": "LOCATION",
}


def format_description(described: Sequence[Mapping[str, Any]]) -> str:
    """:func:`describe` as text: a block a detector, a line a rule, then the context exceptions."""
    lines = []
    for item in described:
        state = "" if item["enabled"] else " (disabled)"
        lines.append(f"{item['detector']}{state}: {item['finds']}")
        for rule in item["rules"]:
            parts = [f"  {rule['name']:<28} {rule['category']:<9}"]
            if rule.get("validator"):
                parts.append(f"validate={rule['validator']}")
            if rule.get("exceptions"):
                parts.append(f"exceptions={','.join(rule['exceptions'])}")
            if rule.get("columns"):
                parts.append(f"columns={','.join(rule['columns'])}")
            if rule.get("from"):
                parts.append(f"from={rule['from']}")
            if rule.get("enabled") is False:
                parts.append("(disabled)")
            if rule.get("file"):
                parts.append(f"[{Path(rule['file']).name if Path(rule['file']).parent.name == 'rules' else rule['file']}]")
            lines.append(" ".join(parts).rstrip())
        for exception in item.get("exceptions", []):
            lines.append(f"  exception {exception['name']:<18} applies to {','.join(exception['applies_to'])}")
        lines.append("")
    return "\n".join(lines)
