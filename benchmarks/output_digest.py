"""Digests of what the pipeline outputs, to show that a change leaves the output as it was.

    python benchmarks/output_digest.py [--physionet DIR]

Runs `anonymize_patient` over every note of the bundled sample database (./anonymizer.toml) and of
the PhysioNet development notes, and prints, per corpus, the number of notes, a SHA-256 of every
result (note id, text, spans with their sources, error) and a SHA-256 of the classifier's token
scores. Two commits with the same digests give the same output. Prints no note text.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
from collections import defaultdict
from pathlib import Path

from anonymizer.config import load_config
from anonymizer.corpora import load_physionet
from anonymizer.pipeline import Pipeline, anonymize_patient, build_pipeline
from anonymizer.record import Note, PatientRecord
from anonymizer.run import prepare
from anonymizer.settings import ClassifierConfig, DetectorsConfig

ROOT = Path(__file__).resolve().parents[1]
PHYSIONET = ROOT.parent / "shared" / "corpora" / "physionet-nursing"


def digests(pipeline: Pipeline, patients: list[tuple[PatientRecord, list[Note]]]) -> tuple[int, str, str]:
    outputs, scores, count = hashlib.sha256(), hashlib.sha256(), 0
    for record, notes in patients:
        for r in anonymize_patient(record, notes, pipeline):
            outputs.update(repr((r.note_id, r.text, [(s.start, s.end, s.category, s.sources) for s in r.spans], r.error)).encode())
            count += 1
        if pipeline.classifier is not None:
            for note in notes:
                _, pairs = pipeline.classifier.score_tokens(note.text, record, rule_spans=pipeline.rule_spans(note.text, record))
                scores.update(repr(pairs).encode())
    return count, outputs.hexdigest(), scores.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--physionet", type=Path, default=PHYSIONET, help="the PhysioNet development notes")
    args = parser.parse_args()
    source, pipeline = prepare(load_config(ROOT / "anonymizer.toml"))
    patients = [
        (batch.records[pid], list(notes))
        for batch in source.batches(500)
        for pid, notes in itertools.groupby(batch.notes, key=lambda n: n.patient_id)
    ]
    print("sample_db  notes=%d outputs=%s scores=%s" % digests(pipeline, patients))
    if args.physionet.is_dir():
        corpus = load_physionet(args.physionet)
        by_patient: dict[str, list[Note]] = defaultdict(list)
        for gold in corpus.notes:
            by_patient[gold.patient_id].append(Note(gold.note_id, gold.patient_id, gold.text))
        pipeline = build_pipeline(DetectorsConfig(), corpus.lists, ClassifierConfig())
        patients = [(corpus.record(pid), notes) for pid, notes in by_patient.items()]
        print("physionet  notes=%d outputs=%s scores=%s" % digests(pipeline, patients))


if __name__ == "__main__":
    main()
