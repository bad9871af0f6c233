"""kill -9 a real `anonymizer run` on PostgreSQL at 20 random (seeded) moments, restarting each time.

At the end the target must hold every note exactly once, with the same text and spans a clean,
uninterrupted run produces.  Moments range from interpreter start-up and the Alembic migration of
the first run to the middle of batch transactions; small batches make the latter frequent.  The
restarts alternate between one process and a pool of two workers.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import sqlalchemy as sa

from anonymizer.config import load_config
from anonymizer.run import run
from tests.conftest import create_hospital
from tests.servers import anonymized, check_every_note_once, query, write_config

SEED = 20261122
KILLS = 20
GIVEN = ["Marisette", "Ravi", "Siti", "Wei Ming", "José", "Siobhan", "Nur Aisyah", "Kumaravel", "Mei Ling", "Oluwaseun"]
FAMILY = ["Vrabel", "Kumar", "binte Ali", "Tan", "O'Brien", "Lim", "Rahman", "Fernandes", "Goh", "Adeyemi"]


def hospital(rng: random.Random, patients: int = 60, notes: int = 5000) -> tuple[list[dict], list[dict]]:
    people = [
        dict(patient_id=i, given_name=rng.choice(GIVEN), family_name=rng.choice(FAMILY), next_of_kin=f"{rng.choice(GIVEN)} X",
             nric=f"S{rng.randrange(10**7):07d}D", phone=f"9{rng.randrange(10**7):07d}", date_of_birth=None, address=None)
        for i in range(1, patients + 1)
    ]
    bodies = []
    for i in range(1, notes + 1):
        p = people[rng.randrange(patients)] if i % 50 else dict(patient_id=patients + 1 + i)  # some have no record
        name = f"{p.get('given_name', 'Tan')} {p.get('family_name', 'Ah Kow')}"
        bodies.append(dict(note_id=i, patient_id=p["patient_id"],
                           body=f"Pt {name} seen {rng.randrange(1, 28)}/03/2019, call {p.get('phone', '61234567')}. BP 120/70 note {i}"))
    return people, bodies


Process = tuple[int, str]  # pid and start time (/proc/<pid>/stat field 22): a reused pid is another process


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, start time) of a live process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), fields[19]


def descendants(pid: int) -> set[Process]:
    """Every live process below `pid` (worker processes, multiprocessing's resource tracker)."""
    children: dict[int, list[Process]] = {}
    # os.listdir, not Path.glob: glob stats each entry, and a process that ends meanwhile raises
    # ProcessLookupError (ESRCH), which pathlib does not ignore.
    for name in os.listdir("/proc"):
        stat = _stat(int(name)) if name.isdigit() else None
        if stat is not None:
            children.setdefault(stat[0], []).append((int(name), stat[1]))
    found: set[Process] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child[0])
    return found


def _alive(process: Process) -> bool:
    stat = _stat(process[0])
    return stat is not None and stat[1] == process[1]


def survivors(processes: set[Process], wait: float = 4.0) -> set[Process]:
    """Those still alive after `wait` seconds (a worker checks its parent once a second)."""
    deadline = time.monotonic() + wait
    alive = set(processes)
    while alive and time.monotonic() < deadline:
        alive = {p for p in alive if _alive(p)}
        time.sleep(0.2)
    return alive


def end(processes: set[Process]) -> None:
    for process in processes:  # started by this test (below its killed runs), checked by id and start time
        if _alive(process):
            try:
                os.kill(process[0], signal.SIGKILL)
            except ProcessLookupError:
                pass


def count(engine: sa.Engine) -> int:
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text("SELECT count(*) FROM anonymized_notes")).scalar_one()
    except sa.exc.DBAPIError:
        return 0  # not created yet


def test_killed_runs_end_with_every_note_exactly_once_as_a_clean_run(databases, tmp_path):
    rng = random.Random(SEED)
    source, target, clean = (databases.url("postgresql", label) for label in ("src", "killed", "clean"))
    patients, notes = hospital(rng)
    create_hospital(source, patients=patients, notes=notes)
    config = write_config(tmp_path / "killed.toml", source, target)
    command = [sys.executable, "-m", "anonymizer", "run", "--config", str(config), "--batch-size", "20", "--workers"]
    poll = databases.engine(target)
    moments = []
    orphans: set[Process] = set()
    for i in range(KILLS):
        before = count(poll)
        # Half the moments are a random time after start (start-up, migration, first batch), half a
        # random number of notes into the run plus a random delay (mid-batch, mid-transaction).
        wait_rows = 0 if rng.random() < 0.5 else rng.randint(1, 100)
        delay = rng.uniform(0.0, 0.8) if wait_rows == 0 else rng.uniform(0.0, 0.2)
        # One process and a worker pool in turn: the output must not depend on it, killed or not.
        process = subprocess.Popen([*command, str(1 + i % 2)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while wait_rows and count(poll) < before + wait_rows and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(delay)
        alive = process.poll() is None
        below = descendants(process.pid)
        process.kill()  # SIGKILL; a no-op if the run had already ended (and poll() reaped it)
        process.wait()
        moments.append((alive, count(poll) - before))
        orphans |= below
    killed_mid_run = sum(alive for alive, _ in moments)
    progressed = count(poll)
    assert killed_mid_run >= KILLS - 2, moments
    assert 0 < progressed < len(notes), "the kills must interrupt the run, not follow its end"

    left = survivors(orphans)
    end(left)
    if left:
        warnings.warn(f"{len(left)} worker process(es) outlived their killed run (see test_workers_exit_...)")
    finish = subprocess.run([*command, "2"], capture_output=True, text=True)
    assert finish.returncode == 0, finish.stderr
    run(load_config(write_config(tmp_path / "clean.toml", source, clean)))

    check_every_note_once(source, target)
    assert anonymized(target) == anonymized(clean)
    spans = "SELECT note_id, start, \"end\", category, detectors FROM phi_spans ORDER BY 1, 2, 3, 4, 5"
    assert query(target, spans) == query(clean, spans)
    assert query(target, "SELECT * FROM patient_digests ORDER BY 1")[:1] and sorted(
        (p, d) for p, d, _ in query(target, "SELECT * FROM patient_digests")
    ) == sorted((p, d) for p, d, _ in query(clean, "SELECT * FROM patient_digests"))
    statuses = [s for (s,) in query(target, "SELECT status FROM runs ORDER BY run_id")]
    assert statuses[-1] == "done" and "failed" not in statuses  # killed runs stay 'running'
    print(f"\ncrash test: {KILLS} kills ({killed_mid_run} while running), {progressed} of {len(notes)} notes "
          f"written before the final run, {len(statuses)} runs recorded, {len(left)} orphaned worker(s); "
          "target == clean run")


def test_workers_exit_when_the_run_is_killed_during_their_start_up(databases, tmp_path):
    source = databases.url("sqlite", "src")
    create_hospital(source)
    config = write_config(tmp_path / "anonymizer.toml", source, databases.url("sqlite", "dst"))
    for _ in range(5):  # a small run can end before both workers are seen: then try again
        process = subprocess.Popen([sys.executable, "-m", "anonymizer", "run", "--config", str(config), "--workers", "2"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        below: set[Process] = set()
        while len(below) < 2 and process.poll() is None and time.monotonic() < deadline:  # the 2 workers (forked: no tracker)
            below = descendants(process.pid)
            time.sleep(0.02)
        if process.poll() is None:
            break
    assert process.poll() is None, "five runs ended before both of their workers were seen"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    left = survivors(below, wait=5.0)
    end(left)
    assert below and not left, f"{len(left)} of {len(below)} processes outlived the killed run"
