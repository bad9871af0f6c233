"""Recall on the patient's own record values: of the gold PATIENT, ID and PHONE phrases, those whose
text is the record's name words, identifier or phone, and the rest, each counted as wholly removed
by the shipped pipeline or not.

    python benchmarks/record_fields.py [GOLD]   (default: sample_db/gold.jsonl)

Prints counts only, never note text.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from anonymizer.api import Deidentifier
from anonymizer.corpora import load_corpus

ROOT = Path(__file__).resolve().parents[1]
WORD = re.compile(r"[^\W\d_]+")


def digits(value: str) -> str:
    return re.sub(r"\D", "", value)[-8:]  # the subscriber number, without country or trunk code


def kind(text: str, category: str, record) -> str | None:
    if category == "PATIENT":
        names = {w.casefold() for v in record.names for w in WORD.findall(v)}
        return "record name" if {w.casefold() for w in WORD.findall(text)} <= names else "other name form"
    if category == "ID":
        return "record id" if text.casefold() in {v.casefold() for v in record.identifiers} else "other id"
    if category == "PHONE":
        return "record phone" if digits(text) in {digits(v) for v in record.phones} else "other phone"
    return None


def main() -> None:
    corpus = load_corpus(sys.argv[1] if len(sys.argv) > 1 else ROOT / "sample_db" / "gold.jsonl")
    deid = Deidentifier.default(corpus.lists)
    counts: dict[str, list[int]] = {}
    for note in corpus.notes:
        record = corpus.record(note.patient_id)
        spans = deid.deidentify(note.text, record).spans
        for start, end, category in note.spans:
            label = kind(note.text[start:end], category, record)
            if label is None:
                continue
            removed = all(any(s.start <= i < s.end for s in spans) for i in range(start, end) if not note.text[i].isspace())
            row = counts.setdefault(label, [0, 0])
            row[0] += 1
            row[1] += removed
    for label, (total, removed) in sorted(counts.items()):
        print(f"{label:16} {removed:>6,} of {total:>6,} phrases wholly removed ({removed / total:.4f})")


if __name__ == "__main__":
    main()
