"""Throughput of a full run against the least any anonymizer does: copying the notes word by word.

    python benchmarks/throughput.py [--notes 100000] [--workers 2] [--model PATH] [--rules-only]
                                    [--skip-copy] [--keep DIR] [--source DB] [--stages STRIDE]

--stages STRIDE prints instead the CPU ms per note of each stage (reading, each detector, the
classifier, union and replacement, writing) of a one-process run over every STRIDE-th batch, as a
Markdown table (docs/performance.md); --source DB uses an existing database of the sample schema
(e.g. sample_db/hospital.db) instead of generating one.

A SQLite source of at least --notes notes is generated in a temporary directory: the sample
database's patients, staff and notes, then the PhysioNet development notes (../shared/corpora/
physionet-nursing) repeated with shifted note and patient ids until there are enough, each repeated
patient with a record holding the name of pid_patientname.txt.  Then, in this process:

(a) the plain copy: the notes streamed with SQLAlchemy Core (the run's own order and batch size),
    each split into words with one ``\\w+`` pass, the rejoined words bulk-inserted into a fresh
    SQLite target, one transaction per batch;
(b) ``anonymizer.run.run`` with the default configuration (every detector group, the sample
    database's lists and the PhysioNet lists, the classifier if a model is available) into
    another fresh SQLite target, with --workers processes.

Both are printed in notes/s with their ratio (the figure that counts: absolute times drift on a
shared machine), and the run's peak memory: the main process's peak RSS (VmHWM, reset before the
run) and the peak of the summed RSS of the main process and its workers (sampled every 50 ms).

The classifier: the model shipped at anonymizer/classifier/models/default.json.gz if present, or
--model PATH.  Without either the run is rules only, and the output says so.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import select
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_db"
PHYSIONET = ROOT.parent / "shared" / "corpora" / "physionet-nursing"
if not PHYSIONET.is_dir():
    PHYSIONET = Path("/work/shared/corpora/physionet-nursing")
HEADER, FOOTER = "START_OF_RECORD=", "||||END_OF_RECORD"
PATIENT_COLUMNS = ("patient_id", "given_name", "family_name", "next_of_kin", "nric", "mrn", "phone", "mobile",
                   "date_of_birth", "address")
ID_SHIFT = 1_000_000  # note and patient ids of repetition r start at r * ID_SHIFT
WORD = re.compile(r"\w+")


# --- the source ---------------------------------------------------------------------------------


def physionet_notes() -> list[tuple[int, str]]:
    """(patient id, text) of every note of id.text, in file order."""
    raw = (PHYSIONET / "id.text").read_text(encoding="utf-8", errors="replace")
    notes, position = [], 0
    while (start := raw.find(HEADER, position)) >= 0:
        newline = raw.index("\n", start)
        pid = int(raw[start + len(HEADER) : newline].split("||||")[0])
        end = raw.index(FOOTER, newline + 1)
        notes.append((pid, raw[newline + 1 : end]))
        position = end + len(FOOTER)
    return notes


def physionet_names() -> dict[int, tuple[str, str]]:
    names = {}
    for line in (PHYSIONET / "pid_patientname.txt").read_text(encoding="utf-8", errors="replace").splitlines():
        parts = [p.strip() for p in line.split("||||")]
        if len(parts) >= 3 and parts[0].isdigit():
            names[int(parts[0])] = (parts[1], parts[2])
    return names


def build_source(path: Path, notes: int) -> int:
    """Write the benchmark source to `path`; returns how many notes it holds."""
    sample = sqlite3.connect(SAMPLE / "hospital.db")
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE patients (patient_id INTEGER PRIMARY KEY, given_name TEXT, family_name TEXT, next_of_kin TEXT,"
        " nric TEXT, mrn TEXT, phone TEXT, mobile TEXT, date_of_birth DATE, address TEXT);"
        "CREATE TABLE notes (note_id INTEGER PRIMARY KEY, patient_id INTEGER, body TEXT);"
        "CREATE TABLE staff (staff_id INTEGER PRIMARY KEY, full_name TEXT, role TEXT);"
    )
    columns = ", ".join(PATIENT_COLUMNS)
    db.executemany(f"INSERT INTO patients ({columns}) VALUES ({', '.join('?' * len(PATIENT_COLUMNS))})",
                   sample.execute(f"SELECT {columns} FROM patients"))
    db.executemany("INSERT INTO staff VALUES (?, ?, ?)", sample.execute("SELECT staff_id, full_name, role FROM staff"))
    db.executemany("INSERT INTO notes VALUES (?, ?, ?)", sample.execute("SELECT note_id, patient_id, body FROM notes"))
    count = db.execute("SELECT count(*) FROM notes").fetchone()[0]
    sample.close()
    physionet, names = physionet_notes(), physionet_names()
    repetition = 1
    while count < notes:
        shift = repetition * ID_SHIFT
        rows = [(shift + i, shift + pid, text) for i, (pid, text) in enumerate(physionet)]
        rows = rows[: notes - count]
        db.executemany("INSERT INTO notes VALUES (?, ?, ?)", rows)
        pids = sorted({pid for _, pid, _ in rows})
        db.executemany("INSERT INTO patients (patient_id, given_name, family_name) VALUES (?, ?, ?)",
                       [(pid, *names[pid - shift]) for pid in pids if pid - shift in names])
        count += len(rows)
        repetition += 1
    db.execute("CREATE INDEX ix_notes_patient ON notes (patient_id, note_id)")
    db.commit()
    db.close()
    return count


def make_config(source: Path, target: Path, model: Path | None, rules_only: bool, batch_size: int, workers: int):
    from anonymizer.config import parse_config

    lists = PHYSIONET / "lists"
    data = {
        "source": {"url": f"sqlite:///{source}"},
        "patients": {"table": "patients", "id": "patient_id", "names": ["given_name", "family_name"],
                     "relatives": ["next_of_kin"], "identifiers": ["nric", "mrn"], "phones": ["phone", "mobile"],
                     "dates": ["date_of_birth"], "addresses": ["address"]},
        "notes": {"table": "notes", "id": "note_id", "patient": "patient_id", "text": "body"},
        "lists": [
            {"category": "DOCTOR", "table": "staff", "column": "full_name"},
            {"category": "HOSPITAL", "file": str(SAMPLE / "lists" / "hospitals.txt")},
            {"category": "LOCATION", "file": str(SAMPLE / "lists" / "places.txt")},
            {"category": "DOCTOR", "file": str(lists / "doctor_first_names.txt")},
            {"category": "DOCTOR", "file": str(lists / "doctor_last_names.txt")},
            {"category": "HOSPITAL", "file": str(lists / "stripped_hospitals.txt")},
            {"category": "LOCATION", "file": str(lists / "local_places_unambig.txt")},
        ],
        "target": {"url": f"sqlite:///{target}"},
        "run": {"batch_size": batch_size},
    }
    if rules_only:
        data["classifier"] = {"enabled": False}
    elif model is not None:
        data["classifier"] = {"model": str(model)}
    config = parse_config(data)
    if workers and any(f.name == "workers" for f in dataclasses.fields(config.run)):
        config = dataclasses.replace(config, run=dataclasses.replace(config.run, workers=workers))
    return config


# --- (a) the plain copy -----------------------------------------------------------------------


def plain_copy(source: Path, target: Path, batch_size: int) -> tuple[int, float, float]:
    """Stream, split into words with one \\w+ pass, bulk-insert the rejoined words.

    Returns (notes, wall seconds, CPU seconds).
    """
    started, cpu = time.perf_counter(), time.process_time()
    src = sa.create_engine(f"sqlite:///{source}")
    dst = sa.create_engine(f"sqlite:///{target}")
    metadata = sa.MetaData()
    notes = sa.Table("notes", metadata, autoload_with=src)
    out_meta = sa.MetaData()
    copied = sa.Table("copied_notes", out_meta, sa.Column("note_id", sa.String(64), primary_key=True),
                      sa.Column("patient_id", sa.String(64)), sa.Column("text", sa.Text))
    out_meta.create_all(dst)
    query = sa.select(notes.c.note_id, notes.c.patient_id, notes.c.body).order_by(notes.c.patient_id, notes.c.note_id)
    count = 0
    with src.connect() as conn:
        result = conn.execution_options(stream_results=True, yield_per=batch_size).execute(query)
        for rows in result.partitions(batch_size):
            batch = [dict(note_id=str(n), patient_id=str(p), text=" ".join(WORD.findall(t or ""))) for n, p, t in rows]
            with dst.begin() as out:
                out.execute(copied.insert(), batch)
            count += len(batch)
    src.dispose()
    dst.dispose()
    return count, time.perf_counter() - started, time.process_time() - cpu


# --- memory -----------------------------------------------------------------------------------


def _status(pid: int | str, key: str) -> int:
    """A /proc/<pid>/status field in KiB (0 if the process is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[str]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += (task / "children").read_text().split()
        except OSError:
            pass
    return found


class MemorySampler:
    """Peak of the summed RSS of this process and its children, sampled; and this process's VmHWM.

    The sampling runs in a process of its own (this script with --sample-memory PID), not a thread:
    a run started from a process without other threads forks its workers, as the command does, and
    a thread here would make it spawn them, each worker building its pipeline anew."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.peak_total = 0

    def __enter__(self) -> "MemorySampler":
        try:
            Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
        except OSError:
            pass
        command = [sys.executable, __file__, "--sample-memory", str(os.getpid()), "--interval", str(self.interval)]
        self._sampler = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        return self

    def __exit__(self, *exc: object) -> None:
        out, _ = self._sampler.communicate("")  # closing its input stops it: it prints the peak
        self.peak_total = int(out or 0)
        self.peak_main = _status("self", "VmHWM")


def sample_memory(pid: int, interval: float) -> None:
    """Print the peak of the summed RSS (KiB) of `pid` and its children but this process, sampled
    every `interval` seconds until standard input closes."""
    me, peak = str(os.getpid()), 0
    while not select.select([sys.stdin], [], [], interval)[0]:
        peak = max(peak, _status(pid, "VmRSS") + sum(_status(c, "VmRSS") for c in _children(pid) if c != me))
    print(peak)


# --- where the time goes ---------------------------------------------------------------------


def stage_table(config, stride: int) -> None:
    """CPU ms per note of each stage of a one-process run, over every `stride`-th batch.

    Mirrors run() -> process_batch() -> anonymize_patient() step by step with a clock around each
    step (reading is timed for every batch); prints a Markdown table.
    """
    import itertools
    from collections import defaultdict

    from anonymizer.budget import NoteBudget, spending
    from anonymizer.normalize import normalize
    from anonymizer.record import NoteResult
    from anonymizer.run import prepare
    from anonymizer.spans import union
    from anonymizer.target import Target

    clock = time.thread_time
    source, pipeline = prepare(config)
    target = Target(config.target.url)
    run_id = target.start_run("run", pipeline.digest)
    names = []
    for detector in pipeline.detectors:
        label = type(detector).__name__ + (f" ({detector._field})" if hasattr(detector, "_field") else "")
        names.append(label)
    spent: dict[str, float] = defaultdict(float)
    notes = read_notes = 0
    batches = source.batches(config.run.batch_size)
    for number in itertools.count():
        t = clock()
        batch = next(batches, None)
        spent["reading (source.batches, records)"] += clock() - t
        if batch is None:
            break
        read_notes += len(batch.notes)
        if number % stride:
            continue
        t = clock()
        written = target.digests(n.note_id for n in batch.notes)
        spent["skip check (target.digests)"] += clock() - t
        results = []
        patients: dict[str, list] = {}
        for note in batch.notes:
            patients.setdefault(note.patient_id, []).append(note)
        for pid, group in patients.items():  # as anonymize_patient: rules note by note, the classifier per patient
            record = batch.records[pid]
            found = []
            budgets = [NoteBudget(pipeline.note_timeout, len(note.text)) for note in group]  # searches timed as in a run
            for note, budget in zip(group, budgets):
                t = clock()
                digest = pipeline.source_digest(note.text, record)
                held = written.get(target.key(note.note_id))
                held is not None and held.digest == digest
                spent["source digest (skip check and result)"] += clock() - t
                t = clock()
                view = normalize(note.text)
                spent["normalised view"] += clock() - t
                spans = []
                with spending([budget]):
                    for label, detector in zip(names, pipeline.detectors):
                        t = clock()
                        spans += detector(view.text, record)
                        spent[f"detector {label}"] += clock() - t
                found.append((digest, view, spans))
            if pipeline.classifier is not None:
                t = clock()
                with spending(budgets):
                    own = pipeline.classifier.patient_spans(record, [(view.text, spans) for _, view, spans in found])
                found = [(d, view, pipeline.classifier.combine(spans, o)) for (d, view, spans), o in zip(found, own)]
                spent["classifier (svm)"] += clock() - t
            for note, (digest, view, spans) in zip(group, found):
                t = clock()
                merged = tuple(union(view.to_original(spans)))
                text = pipeline.replace(note.text, merged, record)
                spent["union + replacement"] += clock() - t
                results.append(NoteResult(note.note_id, note.patient_id, text, merged, digest))
        notes += len(batch.notes)
        t = clock()
        digests = {pid: batch.records[pid].digest() for pid in {n.patient_id for n in batch.notes}}
        target.write(run_id, results, digests)
        spent["writing (target.write)"] += clock() - t
    target.finish_run(run_id, "done", notes, 0, 0)
    spent["reading (source.batches, records)"] *= notes / read_notes  # per processed note
    total = sum(spent.values())
    print(f"\nCPU time per note by stage, one process, {notes:,} notes (every {stride}. batch of {read_notes:,}):\n")
    print("| stage | ms/note | share |")
    print("| --- | ---: | ---: |")
    for stage, seconds in spent.items():
        print(f"| {stage} | {seconds / notes * 1000:.3f} | {seconds / total:.0%} |")
    print(f"| **total** | **{total / notes * 1000:.3f}** | 100% |")
    print(f"\n(= {notes / total:,.0f} notes per CPU-second in one process)")


# --- main -------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=100_000, help="notes in the generated source (at least)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="worker processes of the run")
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--model", type=Path, help="classifier model (default: the shipped one, if any)")
    parser.add_argument("--rules-only", action="store_true", help="disable the classifier")
    parser.add_argument("--skip-copy", action="store_true", help="only the run (e.g. for memory at several sizes)")
    parser.add_argument("--keep", type=Path, help="build the source in this directory and keep it (reused if present)")
    parser.add_argument("--source", type=Path, help="use this SQLite database (the sample schema) instead of building one")
    parser.add_argument("--stages", type=int, metavar="STRIDE",
                        help="instead: CPU ms/note per stage (reading, each detector, classifier, union, writing), "
                             "one process, over every STRIDE-th batch")
    parser.add_argument("--sample-memory", type=int, metavar="PID", help=argparse.SUPPRESS)  # MemorySampler's process
    parser.add_argument("--interval", type=float, default=0.05, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sample_memory:
        return sample_memory(args.sample_memory, args.interval)

    from anonymizer.classifier.model import DEFAULT_MODEL
    from anonymizer.run import run

    model = args.model
    if not args.rules_only and model is None and not DEFAULT_MODEL.is_file():
        print(f"no shipped classifier model at {DEFAULT_MODEL.relative_to(ROOT)} and no --model: the run is RULES ONLY")
        args.rules_only = True
    label = "rules only" if args.rules_only else f"rules + classifier ({model or DEFAULT_MODEL.relative_to(ROOT)})"

    with tempfile.TemporaryDirectory(prefix="anon-bench-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        source = args.source or folder / f"source-{args.notes}.db"
        started = time.perf_counter()
        if not source.exists():
            total = build_source(source, args.notes)
            print(f"source: {total:,} notes built in {time.perf_counter() - started:.1f} s ({source})", flush=True)
        else:
            total = sqlite3.connect(source).execute("SELECT count(*) FROM notes").fetchone()[0]
            print(f"source: {total:,} notes (reused {source})", flush=True)

        if args.stages:
            print(f"pipeline: {label}")
            stage_table(make_config(source, Path(tmp) / "stages.db", model, args.rules_only, args.batch_size, 1), args.stages)
            return
        copy_rate = None
        if not args.skip_copy:
            copy_target = Path(tmp) / "copy.db"
            copied, seconds, copy_cpu = plain_copy(source, copy_target, args.batch_size)
            copy_rate = copied / seconds
            print(f"(a) plain copy: {copied:,} notes in {seconds:.1f} s = {copy_rate:,.0f} notes/s "
                  f"(CPU {copy_cpu:.1f} s = {copied / copy_cpu:,.0f} notes per CPU-second)", flush=True)

        config = make_config(source, Path(tmp) / "run.db", model, args.rules_only, args.batch_size, args.workers)
        workers = getattr(config.run, "workers", None)
        kwargs = {"workers": args.workers} if workers is None and _run_takes_workers() else {}
        with MemorySampler() as memory:
            started, before = time.perf_counter(), _cpu()
            summary = run(config, **kwargs)
            seconds, cpu = time.perf_counter() - started, _cpu() - before
        rate = summary.notes / seconds
        print(f"(b) anonymizer run ({label}, --workers {args.workers}): {summary.notes:,} notes "
              f"({summary.done:,} done, {summary.failed:,} failed) in {seconds:.1f} s = {rate:,.0f} notes/s", flush=True)
        print(f"    CPU {cpu:.1f} s in all processes = {summary.notes / cpu:,.0f} notes per CPU-second; "
              f"load average during the run {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        print(f"    peak memory: main process {memory.peak_main / 1024:,.0f} MiB (VmHWM); "
              f"main + workers {memory.peak_total / 1024:,.0f} MiB (sampled RSS sum)")
        if copy_rate:
            print(f"ratio run/copy (wall clock): 1/{copy_rate / rate:.1f} "
                  f"(= {rate / copy_rate:.4f}; target >= 1/16 = 0.0625)")
            if not args.skip_copy:
                copy_cpu_rate, run_cpu_rate = copied / copy_cpu, summary.notes / cpu
                print(f"ratio per CPU-second (insensitive to other load; x{args.workers} workers on idle cores): "
                      f"1/{copy_cpu_rate / run_cpu_rate:.1f}")


def _cpu() -> float:
    """CPU seconds of this process and of its children that have ended (the pool's workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _run_takes_workers() -> bool:
    import inspect

    from anonymizer.run import run

    return "workers" in inspect.signature(run).parameters


if __name__ == "__main__":
    sys.exit(main())
