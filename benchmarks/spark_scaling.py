"""Notes/s of the Spark engine in local mode beside the single-machine run, on the same notes, and
where Spark's overhead goes.

    python benchmarks/spark_scaling.py [--notes 100000] [--keep DIR] [--source postgresql|sqlite]
                                       [--rules-only] [--only local1,local2,spark1,spark2]

The source is the one of benchmarks/throughput.py (the sample database's notes, then the PhysioNet
development notes repeated until there are --notes), with its configuration (every detector group,
the shipped classifier, the sample's and PhysioNet's lists).  With ``--source postgresql`` (the
default) it is copied into a schema of the project's PostgreSQL server (ANONYMIZER_BENCH_POSTGRES,
default postgresql+psycopg://postgres@127.0.0.1:5432/test), so that both engines read a database
server: the single-machine run through psycopg, Spark through its JDBC reader.  Each measurement
runs in a fresh process, one after the other, and writes a fresh SQLite target:

- ``local1``, ``local2``: the run of ``anonymizer run --workers 1`` / ``--workers 2``;
- ``spark1``, ``spark2``: ``anonymizer run --engine spark --master local[1]`` / ``local[2]``,
  end to end (the JVM's start included), then, in the same process with its Python workers warm,
  Spark's jobs one stage further each, into Spark's ``noop`` sink:
  (a) the source read alone; (b) read, shuffled by patient, and handed to Python workers and back
  through Arrow with no anonymization; (c) read, shuffled and anonymized; and the run again
  (driver checks, the target's digests, the writes).  The differences say where the time goes.

Every figure is wall clock (the machine is shared: other jobs slow some runs) and CPU seconds of the
measured process tree (JVM and Python workers included), which other load barely affects.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import throughput  # noqa: E402  (benchmarks/throughput.py: the source and its configuration)

POSTGRES = os.environ.get("ANONYMIZER_BENCH_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
SCHEMA = "anon_spark_bench"
RUNS = ("local1", "local2", "spark1", "spark2")


# --- the source -------------------------------------------------------------------------------


def postgres_copy(sqlite_path: Path, notes: int) -> str:
    """The SQLite source copied into SCHEMA of the PostgreSQL server (reused when it holds `notes` notes)."""
    url = sa.engine.make_url(POSTGRES).update_query_dict({"options": f"-csearch_path={SCHEMA}"}).render_as_string(hide_password=False)
    admin = sa.create_engine(POSTGRES, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    admin.dispose()
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            if conn.exec_driver_sql("SELECT count(*) FROM notes").scalar_one() == notes:
                return url
    except sa.exc.ProgrammingError:
        pass
    started = time.perf_counter()
    source = sa.create_engine(f"sqlite:///{sqlite_path}")
    metadata = sa.MetaData()
    metadata.reflect(source)
    with engine.begin() as conn:
        for table in metadata.sorted_tables:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table.name}")
    metadata.create_all(engine)
    with source.connect() as read, engine.begin() as write:
        for table in metadata.sorted_tables:
            result = read.execution_options(stream_results=True).execute(table.select())
            for rows in result.partitions(5000):
                write.execute(table.insert(), [dict(r._mapping) for r in rows])
        write.exec_driver_sql("ANALYZE")
    source.dispose()
    engine.dispose()
    print(f"source copied into PostgreSQL schema {SCHEMA} in {time.perf_counter() - started:.0f} s", flush=True)
    return url


def config_for(args: argparse.Namespace, target: Path):
    config = throughput.make_config(Path(args.sqlite), target, None, args.rules_only, 500, 0)
    return dataclasses.replace(config, source=dataclasses.replace(config.source, url=args.source_url))


# --- measuring --------------------------------------------------------------------------------


def tree_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of a live process and its live descendants: the JVM, the processes below it
    (Spark's Python workers), and the rest (this process; a pool's workers)."""
    ticks = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    stats: dict[int, tuple[str, float]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                command, rest = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)
            except OSError:
                continue
            fields = rest.split()
            children.setdefault(int(fields[1]), []).append(int(name))
            stats[int(name)] = (command.split("(", 1)[1], (int(fields[11]) + int(fields[12])) / ticks)
    spent = {"driver": 0.0, "JVM": 0.0, "Python workers": 0.0}
    todo = [(pid, "driver")]
    while todo:
        p, kind = todo.pop()
        command, cpu = stats.get(p, ("", 0.0))
        kind = "JVM" if command == "java" else kind
        spent[kind] += cpu
        todo += [(c, "Python workers" if kind == "JVM" else kind) for c in children.get(p, [])]
    return spent


class Clock:
    """Wall and process-tree CPU seconds (in all, and by kind of process) of each step."""

    def __init__(self) -> None:
        self.steps: dict[str, tuple[float, float, dict[str, float]]] = {}

    def __call__(self, name: str, step):
        started, before = time.perf_counter(), tree_cpu(os.getpid())
        value = step()
        after = tree_cpu(os.getpid())
        spent = {kind: after[kind] - before[kind] for kind in after}
        self.steps[name] = (time.perf_counter() - started, sum(spent.values()), spent)
        return value


def child_local(args: argparse.Namespace, workers: int) -> dict:
    from anonymizer.run import run

    clock = Clock()
    summary = clock("run", lambda: run(config_for(args, Path(args.target)), workers=workers))
    # The pool's workers have ended: their CPU is the children's.
    wall = clock.steps["run"][0]
    usage = os.times()
    cpu = usage.user + usage.system + usage.children_user + usage.children_system
    return {"notes": summary.notes, "done": summary.done, "failed": summary.failed, "steps": {"run": (wall, cpu, {"all": cpu})}}


def child_spark(args: argparse.Namespace, cores: int) -> dict:
    from pyspark import cloudpickle

    from anonymizer.spark import frames, job, tables

    config = config_for(args, Path(args.target))
    clock = Clock()
    spark = clock("JVM and Spark session start", lambda: job.session(config, f"local[{cores}]"))
    spark.sparkContext.setLogLevel("ERROR")
    summary = clock("run (Python workers start and build their pipeline)", lambda: job.run(config, spark=spark))
    result = {"notes": summary.notes, "done": summary.done, "failed": summary.failed}
    if args.breakdown:
        cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this file
        source = tables.open_source(spark, config)
        spec = tables.worker_spec(config, source, config.run.batch_size)
        parts = 4 * spark.sparkContext.defaultParallelism

        def noop(frame) -> None:
            frame.write.format("noop").mode("overwrite").save()

        clock("(a) source read", lambda: (noop(source.notes(parts)), noop(source.patients(parts))))
        real = frames.anonymize_partition
        frames.anonymize_partition = passthrough
        try:
            clock("(b) read, shuffle, Arrow to Python and back", lambda: noop(
                frames.anonymize_frames(source.notes(parts), source.patients(parts), config, spec, partitions=parts).results))
        finally:
            frames.anonymize_partition = real
        clock("(c) read, shuffle, Arrow, anonymization", lambda: noop(
            frames.anonymize_frames(source.notes(parts), source.patients(parts), config, spec, partitions=parts).results))
        target = Path(args.target).with_suffix(".again.db")
        again = dataclasses.replace(config, target=dataclasses.replace(config.target, url=f"sqlite:///{target}"))
        clock("(d) run again, warm", lambda: job.run(again, spark=spark))
    result["steps"] = clock.steps
    spark.stop()
    return result


def passthrough(spec):
    """A partition function with the shape of the real one that anonymizes nothing: each note's
    text is handed back as it came (what reading, shuffling and Arrow cost alone)."""
    import pandas as pd

    from anonymizer.spark.udf import RESULT_COLUMNS, patient_batches

    def run(batches):
        for rows in patient_batches(batches, spec.batch_size):
            notes = [r for r in rows if r.note_id is not None]
            none = [None] * len(notes)
            yield pd.DataFrame({
                "note_id": [r.note_id for r in notes], "patient_id": [r.patient_id for r in notes],
                "status": "done", "text": [r.text for r in notes], "source_digest": "", "reason": none, "spans": none,
                "record_digest": "", "no_record": False, "sources": 1,
            }, columns=list(RESULT_COLUMNS))

    return run


# --- main -------------------------------------------------------------------------------------


def measure(args: argparse.Namespace, name: str, folder: Path) -> dict:
    """One measurement in a fresh process of this script."""
    command = [sys.executable, __file__, "--child", name, "--sqlite", str(args.sqlite), "--source-url", args.source_url,
               "--target", str(folder / f"{name}.db")]
    if args.rules_only:
        command.append("--rules-only")
    if name == "spark2" and not args.no_breakdown:
        command.append("--breakdown")
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=100_000)
    parser.add_argument("--keep", type=Path, help="build the SQLite source in this directory and keep it (reused if present)")
    parser.add_argument("--source", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--rules-only", action="store_true")
    parser.add_argument("--only", default=",".join(RUNS), help="which of " + ", ".join(RUNS))
    parser.add_argument("--no-breakdown", action="store_true", help="spark2 end to end only")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--sqlite", help=argparse.SUPPRESS)
    parser.add_argument("--source-url", help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    parser.add_argument("--breakdown", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        kind, n = args.child[:-1], int(args.child[-1])
        print(json.dumps(child_local(args, n) if kind == "local" else child_spark(args, n)))
        return

    with tempfile.TemporaryDirectory(prefix="anon-spark-bench-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        args.sqlite = folder / f"source-{args.notes}.db"
        if not args.sqlite.exists():
            total = throughput.build_source(args.sqlite, args.notes)
        else:
            total = sqlite3.connect(args.sqlite).execute("SELECT count(*) FROM notes").fetchone()[0]
        args.source_url = postgres_copy(args.sqlite, total) if args.source == "postgresql" else f"sqlite:///{args.sqlite}"
        label = "rules only" if args.rules_only else "rules + classifier"
        print(f"{total:,} notes, {label}, source {args.source}, target SQLite; {os.cpu_count()} cores, "
              f"load average {os.getloadavg()[0]:.1f} at the start", flush=True)
        rows = []
        for name in args.only.split(","):
            result = measure(args, name, Path(tmp))
            # End to end as a user's command sees it: for Spark, the JVM's start and the run.
            wall, cpu = (sum(x) for x in zip(*(v[:2] for k, v in result["steps"].items() if not k.startswith("("))))
            engine = f"--workers {name[-1]}" if name.startswith("local") else f"--engine spark --master local[{name[-1]}]"
            rows.append((engine, result["notes"], wall, cpu))
            print(f"{engine:40} {result['notes']:,} notes ({result['failed']} failed) in {wall:.1f} s = {result['notes'] / wall:,.0f} "
                  f"notes/s; CPU {cpu:.1f} s = {result['notes'] / cpu:,.0f} notes per CPU-second; "
                  f"load average {os.getloadavg()[0]:.1f}", flush=True)
            for step, (wall, cpu, kinds) in result["steps"].items():
                if step != "run":
                    split = ", ".join(f"{kind} {spent:.1f}" for kind, spent in kinds.items())
                    print(f"    {step:52} {wall:6.1f} s wall {cpu:6.1f} s CPU ({split})")
        print("\n| engine | notes | seconds | notes/s | CPU seconds | notes per CPU-second |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for engine, notes, wall, cpu in rows:
            print(f"| `{engine}` | {notes:,} | {wall:,.0f} | {notes / wall:,.0f} | {cpu:,.0f} | {notes / cpu:,.0f} |")


if __name__ == "__main__":
    main()
