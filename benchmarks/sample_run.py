"""Time the bundled sample job end to end (read, detect, write) and print notes/s.

    python benchmarks/sample_run.py [--repeat 3] [--no-classifier]

Each repetition writes to a fresh SQLite target in a temporary directory, so nothing is skipped.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path

from anonymizer.config import load_config
from anonymizer.run import run

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-classifier", action="store_true")
    args = parser.parse_args()
    config = load_config(ROOT / "sample_db" / "anonymizer.toml")
    if args.no_classifier:
        config = dataclasses.replace(config, classifier=dataclasses.replace(config.classifier, enabled=False))
    rates = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            target = dataclasses.replace(config.target, url=f"sqlite:///{tmp}/bench.db")
            started = time.perf_counter()
            summary = run(dataclasses.replace(config, target=target))
            seconds = time.perf_counter() - started
        rates.append(summary.notes / seconds)
        print(f"{summary.notes} notes in {seconds:.2f} s: {summary.notes / seconds:,.0f} notes/s")
    label = "rules only" if args.no_classifier else "rules + classifier"
    print(f"sample run ({label}), median of {args.repeat}: {statistics.median(rates):,.0f} notes/s")


if __name__ == "__main__":
    main()
