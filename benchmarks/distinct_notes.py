"""CPU per note on notes seen for the first time, against the same notes seen again.

    python benchmarks/distinct_notes.py [--source DB] [--notes 3491] [--passes 2]

A run keeps caches for what repeats across notes (the classifier's weight sums per word and per
chunk shape, the record detector's parsed dates, the phone detector's verdicts, the staff
directory's spelling variants).  benchmarks/throughput.py repeats the PhysioNet half until it has
enough notes, so after its first pass most lookups hit; a hospital's notes are all distinct.
This runs the first --notes notes of a source of the throughput benchmark's schema (by default
the one `throughput.py --keep /tmp/tp100k` kept, whose first 3,491 notes are its distinct ones)
through ``process_batch`` in one process, --passes times, and prints CPU ms per note for each pass.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from throughput import ROOT, make_config

from anonymizer.worker import prepare, process_batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=Path("/tmp/tp100k/source-100000.db"))
    parser.add_argument("--notes", type=int, default=3491)
    parser.add_argument("--passes", type=int, default=2)
    args = parser.parse_args()
    if not args.source.is_file():
        raise SystemExit(f"no source at {args.source}: run benchmarks/throughput.py --keep DIR first, or pass --source")
    with tempfile.TemporaryDirectory() as folder:
        model = ROOT / "anonymizer" / "classifier" / "models" / "default.json.gz"
        config = make_config(args.source, Path(folder) / "target.db", model if model.is_file() else None, False, 200, 1)
        source, pipeline = prepare(config)
        batches = list(source.batches(config.run.batch_size, args.notes))
        notes = sum(len(batch.notes) for batch in batches)
        for number in range(1, args.passes + 1):
            start = time.thread_time()
            for batch in batches:
                process_batch(batch, pipeline, lambda note_id, digest: False)
            spent = time.thread_time() - start
            print(f"pass {number}: {notes:,} notes, {spent / notes * 1000:.3f} CPU ms per note")


if __name__ == "__main__":
    main()
