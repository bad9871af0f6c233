"""What a large list costs the lists detector: the time to compile its trie once per run, and the
time to search a note.

    python benchmarks/list_size.py [--entries 30000] [--notes 3000]

The list is the first `--entries` towns of rules/places/cities.txt as LOCATION entries and a
sixth as many hospitals made of them ("<town> General Hospital"); the notes are the sample
database's, repeated up to `--notes`.  Prints figures only, never note text.
"""

from __future__ import annotations

import argparse
import sqlite3
import time
from pathlib import Path

from anonymizer.detectors.lists import ListDetector
from anonymizer.record import empty_record
from anonymizer.resources import data_dir, read_word_list

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=30_000)
    parser.add_argument("--notes", type=int, default=3_000)
    args = parser.parse_args()
    towns = [row.split("\t")[0] for row in read_word_list(data_dir("rules") / "places" / "cities.txt")][: args.entries]
    lists = {"LOCATION": towns, "HOSPITAL": [f"{town} General Hospital" for town in towns[: args.entries // 6]]}
    start = time.perf_counter()
    detector = ListDetector(lists)
    built = time.perf_counter() - start
    with sqlite3.connect(ROOT / "sample_db" / "hospital.db") as db:
        notes = [text for (text,) in db.execute("SELECT body FROM notes")]
    notes = (notes * (args.notes // len(notes) + 1))[: args.notes]
    record = empty_record("")
    start = time.perf_counter()
    for text in notes:
        detector(text, record)
    searched = time.perf_counter() - start
    entries = sum(len(v) for v in lists.values())
    print(f"{entries:,} entries: trie compiled in {built:.2f} s; {searched / len(notes) * 1e6:.0f} µs a note over {len(notes):,} notes")


if __name__ == "__main__":
    main()
