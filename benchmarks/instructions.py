"""Instructions (callgrind) of one warm pass of the pipeline, or of one stage, over whole patients.

    python benchmarks/instructions.py [--stage pipeline|classifier|DETECTOR] [--skip 25] [--batches 4]

A machine's speed drifts by a tenth or more within minutes, so a change to the hot path is judged
by the instructions it executes, which are the same from run to run.  The notes are those of
throughput.py's 30,000-note source (built in a temporary directory, or --source DB): --batches
batches of 100 notes after the first --skip (25 skips the sample database's 2,041 notes, leaving
PhysioNet's, which are 98 % of the benchmark; 0 takes the sample database's), split into whole
patients.  After a warm-up pass, valgrind's callgrind counts one more pass:

- ``pipeline``: ``anonymize_patient`` on each patient's notes;
- ``classifier``: ``patient_spans`` on each patient's notes and their rule spans;
- a detector's class name (``PatternDetector``, ``ListDetector``, ...): that detector on each note.

It prints the instructions, the notes and a hash of the pass's output (the same hash before and
after a change that should not change the output).  Needs valgrind (Debian's package); the
script runs itself under it, with PYTHONHASHSEED=0, collecting only inside the measured pass.
"""

from __future__ import annotations

import argparse
import hashlib
import operator
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import build_source, make_config  # noqa: E402


def measured(stage: str, source: Path, skip: int, batches: int) -> None:
    """Inside valgrind: prepare, warm up, switch instrumentation on, run the pass once."""
    from anonymizer.normalize import normalize
    from anonymizer.pipeline import anonymize_patient
    from anonymizer.run import prepare

    config = make_config(source, source.with_name("instructions-target.db"), None, False, 100, 1)
    reader, pipeline = prepare(config)
    patients = []
    for k, batch in enumerate(reader.batches(100)):
        if k >= skip + batches:
            break
        if k >= skip:
            groups: dict[str, list] = {}
            for note in batch.notes:
                groups.setdefault(note.patient_id, []).append(note)
            patients += [(batch.records[pid], notes) for pid, notes in groups.items()]
    if stage == "pipeline":
        def one_pass() -> list:
            return [anonymize_patient(record, notes, pipeline) for record, notes in patients]
    elif stage == "classifier":
        views = [(record, [normalize(n.text).text for n in notes]) for record, notes in patients]
        work = [(record, [(text, pipeline.rule_spans(text, record)) for text in texts]) for record, texts in views]

        def one_pass() -> list:
            return [pipeline.classifier.patient_spans(record, notes) for record, notes in work]
    else:
        chosen = [d for d in pipeline.detectors if type(d).__name__ == stage]
        if not chosen:
            sys.exit(f"no detector {stage!r} in the pipeline: {sorted({type(d).__name__ for d in pipeline.detectors})}")
        texts = [(record, normalize(n.text).text) for record, notes in patients for n in notes]

        def one_pass() -> list:
            return [d(text, record) for record, text in texts for d in chosen]

    one_pass()  # warm: caches filled, as in a long run
    subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], capture_output=True, check=False)
    out = operator.call(one_pass)  # callgrind collects inside operator.call only
    digest = hashlib.sha256(repr(out).encode()).hexdigest()[:12]
    print(f"notes {sum(len(notes) for _, notes in patients)} output {digest}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", default="pipeline", help="pipeline, classifier or a detector's class name")
    parser.add_argument("--skip", type=int, default=25, help="batches of 100 notes skipped first")
    parser.add_argument("--batches", type=int, default=4, help="batches of 100 notes measured")
    parser.add_argument("--source", type=Path, help="a source database of the sample schema (default: built)")
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        measured(args.stage, args.source, args.skip, args.batches)
        return
    with tempfile.TemporaryDirectory() as tmp:
        source = args.source or Path(tmp) / "source-30000.db"
        if args.source is None:
            build_source(source, 30_000)
        command = [
            "valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/callgrind.out", "--instr-atstart=no",
            "--collect-atstart=no", "--toggle-collect=_operator_call", sys.executable, __file__, "--inner",
            "--stage", args.stage, "--skip", str(args.skip), "--batches", str(args.batches), "--source", str(source),
        ]
        done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"}, check=False)
        collected = re.search(r"Collected : (\d+)", done.stderr)
        if done.returncode or collected is None:
            sys.exit(f"valgrind failed (exit {done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
        print(f"{args.stage}: {int(collected.group(1)):,} instructions; {done.stdout.strip()}")


if __name__ == "__main__":
    main()
