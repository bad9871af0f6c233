"""Annotated corpora for training and evaluation, read into one common shape.

Two formats are read:

* the PhysioNet de-identification format (``id.text``, ``id-phi.phrase``, ``pid_patientname.txt``
  and an optional ``lists/`` folder), as distributed with the deid software package;
* the sample database's gold file (``gold.jsonl``, one JSON object a note) whose note texts and
  patient records are read from the database its ``anonymizer.toml`` describes.

Both give a :class:`Corpus`: the notes with their gold spans (``GoldNote``), the patients' records
(``{patient_id: PatientRecord}``) and the hospital's lists (``{category: [entries]}``).
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from anonymizer.record import PatientRecord, empty_record

# PhysioNet gold categories -> ours.  "Location" in this corpus covers hospitals too, so it maps to
# LOCATION (a token found as HOSPITAL still counts as found: recall is per gold category).  "Other"
# is the corpus' catch-all for identifying strings that fit no other class (in the development half:
# a unit/room code and a seven-digit number) - what our tag set calls an ID.
PHYSIONET_CATEGORIES: dict[str, str] = {
    "HCPName": "DOCTOR",
    "PTName": "PATIENT",
    "PTNameInitial": "PATIENT",
    "RelativeProxyName": "RELATIVE",
    "Date": "DATE",
    "DateYear": "DATE",
    "Location": "LOCATION",
    "Phone": "PHONE",
    "Age": "AGE",
    "Other": "ID",
}

# The optional lists/ folder of a PhysioNet-format corpus: file -> our category.
PHYSIONET_LISTS: dict[str, str] = {
    "doctor_first_names.txt": "DOCTOR",
    "doctor_last_names.txt": "DOCTOR",
    "stripped_hospitals.txt": "HOSPITAL",
    "local_places_unambig.txt": "LOCATION",
}

HEADER = "START_OF_RECORD="
FOOTER = "||||END_OF_RECORD"


@dataclass(frozen=True, slots=True)
class GoldNote:
    """One annotated note: text[start:end] is PHI of `category` for every gold span."""

    note_id: str
    patient_id: str
    text: str
    spans: tuple[tuple[int, int, str], ...]


@dataclass
class Corpus:
    name: str
    notes: list[GoldNote]
    records: dict[str, PatientRecord]
    lists: dict[str, list[str]] = field(default_factory=dict)

    def record(self, patient_id: str) -> PatientRecord:
        return self.records.get(patient_id) or empty_record(patient_id)


def in_lockbox(patient_id: str) -> bool:
    """Whether a patient belongs to the lockbox: a numeric id divisible by 3 (the PhysioNet corpus
    README's split), any other id by a stable hash, so about a third of the patients either way.

    Nothing is decided on the lockbox's notes: it is scored once a piece of work is finished."""
    key = str(patient_id).strip()
    if key.isdigit():
        return int(key) % 3 == 0
    return int(hashlib.sha256(key.encode()).hexdigest(), 16) % 3 == 0


def split_lockbox(corpus: Corpus) -> tuple[Corpus, Corpus]:
    """The tuning part and the lockbox of a corpus, split by patient (see :func:`in_lockbox`)."""
    parts: tuple[list[GoldNote], list[GoldNote]] = ([], [])
    for note in corpus.notes:
        parts[in_lockbox(note.patient_id)].append(note)
    return tuple(  # type: ignore[return-value]
        Corpus(f"{corpus.name} ({label})", notes, corpus.records, corpus.lists) for label, notes in zip(("tuning part", "lockbox"), parts)
    )


class CorpusError(ValueError):
    """An annotated corpus could not be read. The message is one line."""


# --------------------------------------------------------------------------------------- PhysioNet


def read_physionet_text(path: Path) -> dict[tuple[str, str], str]:
    """``{(patient_id, note_id): text}`` from an ``id.text`` file."""
    raw = path.read_text(encoding="utf-8", errors="replace")
    notes: dict[tuple[str, str], str] = {}
    position = 0
    while True:
        start = raw.find(HEADER, position)
        if start < 0:
            break
        newline = raw.find("\n", start)
        if newline < 0:
            raise CorpusError(f"{path}: header without a newline at offset {start}")
        header = raw[start + len(HEADER) : newline]
        parts = header.split("||||")
        if len(parts) < 2:
            raise CorpusError(f"{path}: malformed record header at offset {start}")
        end = raw.find(FOOTER, newline + 1)
        if end < 0:
            raise CorpusError(f"{path}: record {parts[0]}/{parts[1]} has no end marker")
        notes[(parts[0].strip(), parts[1].strip())] = raw[newline + 1 : end]
        position = end + len(FOOTER)
    return notes


def read_physionet_phrases(path: Path) -> dict[tuple[str, str], list[tuple[int, int, str]]]:
    """``{(patient_id, note_id): [(start, end, our_category)]}`` from an ``id-phi.phrase`` file."""
    spans: dict[tuple[str, str], list[tuple[int, int, str]]] = defaultdict(list)
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split(None, 5)
        if len(parts) < 5:
            raise CorpusError(f"{path}:{number}: expected '<pid> <note> <start> <end> <Category> <text>'")
        pid, nid, start, end, category = parts[:5]
        if category not in PHYSIONET_CATEGORIES:
            raise CorpusError(f"{path}:{number}: unknown category {category!r}")
        spans[(pid, nid)].append((int(start), int(end), PHYSIONET_CATEGORIES[category]))
    return spans


def read_physionet_names(path: Path) -> dict[str, PatientRecord]:
    records = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split("||||")]
        records[parts[0]] = PatientRecord(patient_id=parts[0], names=tuple(p for p in parts[1:] if p))
    return records


def read_physionet_lists(folder: Path) -> dict[str, list[str]]:
    """The optional ``lists/`` folder as ``{category: [entries]}`` (entries stripped, deduplicated)."""
    lists: dict[str, list[str]] = {}
    for name, category in PHYSIONET_LISTS.items():
        path = folder / name
        if not path.is_file():
            continue
        entries = lists.setdefault(category, [])
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            entry = line.strip()
            if entry and entry not in entries:
                entries.append(entry)
    return lists


def load_physionet(folder: str | Path, with_lists: bool = True) -> Corpus:
    """Read a corpus in the PhysioNet format. The text notes without a phrase line have no PHI."""
    folder = Path(folder)
    for required in ("id.text", "id-phi.phrase"):
        if not (folder / required).is_file():
            raise CorpusError(f"{folder}: {required} not found (not a PhysioNet-format corpus)")
    texts = read_physionet_text(folder / "id.text")
    phrases = read_physionet_phrases(folder / "id-phi.phrase")
    unknown = sorted(set(phrases) - set(texts))
    if unknown:
        raise CorpusError(f"{folder}: phrases for note {unknown[0][0]}/{unknown[0][1]} absent from id.text")
    names = folder / "pid_patientname.txt"
    records = read_physionet_names(names) if names.is_file() else {}
    notes = []
    for (pid, nid), text in texts.items():
        spans = tuple(sorted(set(phrases.get((pid, nid), ()))))
        for start, end, _ in spans:
            if not 0 <= start < end <= len(text):
                raise CorpusError(f"{folder}: span {start}-{end} outside note {pid}/{nid}")
        notes.append(GoldNote(f"{pid}-{nid}", pid, text, spans))
    lists = read_physionet_lists(folder / "lists") if with_lists and (folder / "lists").is_dir() else {}
    for pid in {n.patient_id for n in notes} - set(records):
        records[pid] = empty_record(pid)
    return Corpus(folder.name, notes, records, lists)


# ---------------------------------------------------------------------------- sample database gold


def load_gold_jsonl(gold: str | Path, config: str | Path | None = None, database_url: str | None = None) -> Corpus:
    """Read a gold file whose notes live in a database described by an ``anonymizer.toml``.

    `config` defaults to ``anonymizer.toml`` beside the gold file; `database_url` overrides the
    configuration's ``source.url`` (a relative SQLite path in it is resolved against the config's
    folder when it does not exist relative to the working directory).
    """
    import sqlalchemy as sa

    from anonymizer.config import load_config
    from anonymizer.source import Source, connect

    gold = Path(gold)
    config_path = Path(config) if config else gold.with_name("anonymizer.toml")
    cfg = load_config(config_path)
    url = database_url or _resolve_sqlite(cfg.source.url, config_path.parent)
    source = Source(cfg, connect(url, "source.url"))

    wanted: list[dict] = []
    for number, line in enumerate(gold.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                wanted.append(json.loads(line))
            except json.JSONDecodeError:
                raise CorpusError(f"{gold}:{number}: not valid JSON") from None
    texts: dict[str, tuple[str, str]] = {}
    with source.engine.connect() as conn:
        for note_id, patient, text in conn.execute(sa.select(source.note_id, source.note_patient, source.note_text)):
            texts[str(note_id)] = (str(patient), text or "")
    notes = []
    for item in wanted:
        nid = str(item["note_id"])
        if nid not in texts:
            raise CorpusError(f"{gold}: note {nid} not in table {cfg.notes.table}")
        patient, text = texts[nid]
        spans = tuple(sorted({(int(s["start"]), int(s["end"]), str(s["category"])) for s in item.get("spans", [])}))
        notes.append(GoldNote(nid, str(item.get("patient_id", patient)), text, spans))
    records = source.records({n.patient_id for n in notes})
    lists: dict[str, list[str]] = {}
    for index, item in enumerate(cfg.lists):
        if item.file:
            path = Path(item.file)
            if not path.is_absolute() and not path.exists():
                # relative to the working directory, else to the config's folder or its parent
                for base in (config_path.parent, config_path.parent.parent):
                    if (base / item.file).exists():
                        path = base / item.file
                        break
            from anonymizer.resources import read_word_list

            entries = read_word_list(path)
        else:
            entries = source.list_entries(item, index)
        target = lists.setdefault(item.category, [])
        target.extend(e for e in entries if e not in target)
    return Corpus(gold.parent.name or "gold", notes, records, lists)


def _resolve_sqlite(url: str, base: Path) -> str:
    prefix = "sqlite:///"
    if url.startswith(prefix) and not url.startswith(prefix + "/"):
        relative = Path(url[len(prefix) :])
        if not relative.exists() and (base / relative).exists():
            return prefix + str((base / relative).resolve())
        if not relative.exists() and (base / relative.name).exists():
            return prefix + str((base / relative.name).resolve())
    return url


def load_corpus(path: str | Path, **kwargs) -> Corpus:
    """A PhysioNet-format folder, or a ``gold.jsonl`` file (its database from the config beside it)."""
    path = Path(path)
    if path.is_dir() and (path / "id.text").is_file():
        return load_physionet(path, **kwargs)
    if path.is_dir() and (path / "gold.jsonl").is_file():
        return load_gold_jsonl(path / "gold.jsonl", **kwargs)
    if path.is_file() and path.suffix == ".jsonl":
        return load_gold_jsonl(path, **kwargs)
    raise CorpusError(f"{path}: neither a PhysioNet-format folder nor a gold .jsonl file")


def merge_lists(*sources: Mapping[str, list[str]]) -> dict[str, list[str]]:
    merged: dict[str, list[str]] = {}
    for source in sources:
        for category, entries in source.items():
            target = merged.setdefault(category, [])
            target.extend(e for e in entries if e not in target)
    return merged
