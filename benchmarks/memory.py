"""Peak memory of `anonymizer run` on generated PostgreSQL sources: does the source read stream?

    python benchmarks/memory.py [--notes 100000 200000] [--classifier] [--batch-size 500]
                                [--url postgresql+psycopg://postgres@127.0.0.1:5432/test]

For each size, a fresh schema of the server's database gets a synthetic hospital (one patient per
ten notes, notes of ~400 characters with names, NRICs, phones and dates) loaded with COPY; then
`python -m anonymizer run` runs in a subprocess from that schema into a second fresh schema, and
its peak resident set size (ru_maxrss from wait4: that process, or with --workers N the largest of
it and its worker processes, each of which holds its own pipeline) is printed.  If memory is
flat the numbers for 100k and 200k notes are about the same.  Both schemas are dropped afterwards.

The classifier is off by default (rules only; a 200,000-note run then takes 10-20 minutes on two
cores, the classifier would multiply that); pass --classifier to measure it too.

--unstreamed also measures, for comparison, the same run with the source read buffered (the
`stream_results` option removed): that process is killed once 2,000 notes are written, by which
time the driver holds the whole result, and its peak RSS is printed.

--adversarial measures instead one hostile note of --note-size characters (default 1,000,000) per
case, each anonymized alone in a fresh process with the shipped model and the default budget:
"é" then "1/" repeated (one non-ASCII character before a long run without spaces), a base64 blob
after a "°", and "12/12/2012 " repeated (dense dates).  Printed: the outcome (anonymized, or the
failure's class) and the process's peak RSS beside that of the same process on an empty note.  A
process is capped at --cap GiB of address space (so that a build whose memory grows faster than
the note cannot take the machine down); one that hits the cap is reported as such.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import sqlalchemy as sa

GIVEN = ["Marisette", "Ravi", "Siti", "Wei Ming", "José", "Siobhan", "Nur Aisyah", "Kumaravel", "Mei Ling", "Oluwaseun"]
FAMILY = ["Vrabel", "Kumar", "binte Ali", "Tan", "O'Brien", "Lim", "Rahman", "Fernandes", "Goh", "Adeyemi"]
FILLER = (
    "pt c/o chest pain 2/7 BP 120/70 HR 88 afebrile lungs clear abdomen soft non tender plan review "
    "bloods FBC U/E LFT CXR ECG sinus rhythm no acute changes continue current medications follow up"
).split()


def schema_url(base: str, schema: str) -> str:
    url = sa.engine.make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})
    return url.render_as_string(hide_password=False)


def generate(base: str, schema: str, notes: int, seed: int = 1) -> None:
    """Create the patients and notes tables in `schema` and fill them with COPY."""
    rng = random.Random(seed)
    engine = sa.create_engine(schema_url(base, schema))
    patients = max(1, notes // 10)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE patients (patient_id integer PRIMARY KEY, given_name text, family_name text, "
            "next_of_kin text, nric text, phone text, date_of_birth date, address text)"
        )
        conn.exec_driver_sql("CREATE TABLE notes (note_id integer PRIMARY KEY, patient_id integer, body text)")
        cursor = conn.connection.dbapi_connection.cursor()
        with cursor.copy("COPY patients FROM STDIN") as copy:
            for pid in range(patients):
                copy.write_row((
                    pid, rng.choice(GIVEN), rng.choice(FAMILY), f"{rng.choice(GIVEN)} {rng.choice(FAMILY)}",
                    f"S{rng.randrange(10**7):07d}D", f"9{rng.randrange(10**7):07d}",
                    f"{rng.randrange(1930, 2010)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}",
                    f"Blk {rng.randrange(1, 999)} Lorong {rng.randrange(1, 9)} #0{rng.randrange(1, 9)}-{rng.randrange(10, 99)}",
                ))
        with cursor.copy("COPY notes FROM STDIN") as copy:
            for nid in range(notes):
                pid = rng.randrange(patients)
                words = rng.choices(FILLER, k=45)
                words.insert(rng.randrange(len(words)), f"Pt {rng.choice(GIVEN)} {rng.choice(FAMILY)}")
                words.insert(rng.randrange(len(words)), f"seen {rng.randrange(1, 28)}/{rng.randrange(1, 12)}/2019")
                words.insert(rng.randrange(len(words)), f"call {rng.randrange(6, 10)}{rng.randrange(10**6, 10**7)}")
                copy.write_row((nid, pid, " ".join(words)))
        conn.exec_driver_sql("ANALYZE patients; ANALYZE notes")
    engine.dispose()


CONFIG = """
[source]
url = "{source}"
[patients]
table = "patients"
id = "patient_id"
names = ["given_name", "family_name"]
relatives = ["next_of_kin"]
identifiers = ["nric"]
phones = ["phone"]
dates = ["date_of_birth"]
addresses = ["address"]
[notes]
table = "notes"
id = "note_id"
patient = "patient_id"
text = "body"
[target]
url = "{target}"
[classifier]
enabled = {classifier}
[run]
batch_size = {batch_size}
"""


UNSTREAMED = """
import sqlalchemy.engine.base as base
options = base.Connection.execution_options
def buffered(self, **kw):
    kw.pop("stream_results", None)
    kw.pop("yield_per", None)
    return options(self, **kw)
base.Connection.execution_options = buffered
from anonymizer.cli import app
app()
"""


ADVERSARIAL = {
    "é + 1/": '("é " + "1/" * size)[:size]',
    "base64 after °": '("seen ° " + base64.b64encode(random.Random(0).randbytes(size)).decode())[:size]',
    "dense dates": '("12/12/2012 " * size)[:size]',
    "empty note": '""',
}
ONE_NOTE = """
import base64, random, sys
from anonymizer.settings import ClassifierConfig, DetectorsConfig
from anonymizer.pipeline import anonymize_patient, build_pipeline
from anonymizer.record import Note, PatientRecord
size = int(sys.argv[2])
text = eval(sys.argv[1])
pipeline = build_pipeline(DetectorsConfig(), {}, ClassifierConfig())
[result] = anonymize_patient(PatientRecord("1", names=("José", "Tan")), [Note("1", "1", text)], pipeline)
print("anonymized" if result.error is None else result.error.split(":")[0])
"""


def adversarial(size: int, cap_gib: float) -> None:
    """Peak RSS of one process anonymizing one hostile note of `size` characters, per case."""

    def limit() -> None:
        cap = int(cap_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    for case, expression in ADVERSARIAL.items():
        started = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-c", ONE_NOTE, expression, str(size)], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, preexec_fn=limit)
        out = (process.stdout.read().decode(errors="replace").strip().splitlines() or [""])[-1]  # after any log lines
        _, status, usage = os.wait4(process.pid, 0)
        if os.waitstatus_to_exitcode(status):
            out = f"over the {cap_gib:g} GiB cap" if "MemoryError" in out else f"exit {os.waitstatus_to_exitcode(status)}"
        print(f"  {case:>15}: peak RSS {usage.ru_maxrss / 1024:,.0f} MiB, {out}, {time.perf_counter() - started:,.1f} s", flush=True)


def written(url: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.exec_driver_sql("SELECT count(*) FROM anonymized_notes").scalar_one()
    except sa.exc.DBAPIError:
        return 0
    finally:
        engine.dispose()


def measure(
    base: str, notes: int, classifier: bool, batch_size: int, unstreamed: bool = False, workers: int = 1
) -> tuple[float, float, int]:
    """(peak RSS in MiB, seconds, exit status) of one run over a fresh `notes`-note source."""
    tag = uuid.uuid4().hex[:8]
    source, target = f"anon_bench_src_{tag}", f"anon_bench_dst_{tag}"
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{source}"')
        conn.exec_driver_sql(f'CREATE SCHEMA "{target}"')
    try:
        started = time.perf_counter()
        generate(base, source, notes)
        print(f"  generated {notes:,} notes in {time.perf_counter() - started:.0f} s", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            config = Path(tmp) / "anonymizer.toml"
            config.write_text(CONFIG.format(
                source=schema_url(base, source), target=schema_url(base, target),
                classifier=str(classifier).lower(), batch_size=batch_size,
            ))
            started = time.perf_counter()
            program = ["-c", UNSTREAMED] if unstreamed else ["-m", "anonymizer"]
            process = subprocess.Popen(
                [sys.executable, *program, "run", "--config", str(config), "--workers", str(workers)],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            )
            while unstreamed and process.poll() is None and written(schema_url(base, target)) < 2000:
                time.sleep(0.5)
            if unstreamed and process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
            _, status, usage = os.wait4(process.pid, 0)
            seconds = time.perf_counter() - started
            process.returncode = os.waitstatus_to_exitcode(status)
            if process.returncode > 0:
                sys.stderr.write(process.stderr.read().decode(errors="replace"))
        return usage.ru_maxrss / 1024, seconds, process.returncode  # Linux: ru_maxrss in KiB
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{source}" CASCADE')
            conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{target}" CASCADE')
        admin.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--notes", type=int, nargs="+", default=[100_000, 200_000])
    parser.add_argument("--classifier", action="store_true", help="Also run the SVM (much slower).")
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--unstreamed", action="store_true", help="Also measure a buffered source read.")
    parser.add_argument("--workers", type=int, default=1, help="Worker processes of the run (default 1).")
    parser.add_argument("--adversarial", action="store_true", help="Instead: one hostile note per case (see above).")
    parser.add_argument("--note-size", type=int, default=1_000_000, help="Characters of each hostile note.")
    parser.add_argument("--cap", type=float, default=8.0, help="GiB of address space a hostile note's process may take.")
    args = parser.parse_args()
    if args.adversarial:
        print(f"one hostile note of {args.note_size:,} characters per process (shipped model, default budget):", flush=True)
        adversarial(args.note_size, args.cap)
        return
    label = ("rules + classifier" if args.classifier else "rules only, classifier disabled") + f", {args.workers} worker(s)"
    for n in args.notes:
        print(f"{n:,} notes ({label}, batch size {args.batch_size}):", flush=True)
        peak, seconds, status = measure(args.url, n, args.classifier, args.batch_size, workers=args.workers)
        print(f"  peak RSS {peak:,.0f} MiB; run {seconds:,.0f} s ({n / seconds:,.0f} notes/s); exit {status}", flush=True)
        if args.unstreamed:
            peak, seconds, _ = measure(args.url, n, args.classifier, args.batch_size, unstreamed=True, workers=args.workers)
            print(f"  without streaming (killed after 2,000 notes): peak RSS {peak:,.0f} MiB", flush=True)


if __name__ == "__main__":
    main()
