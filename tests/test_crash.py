"""kill -9 a real `anonymizer run` on PostgreSQL at 20 random (seeded) moments, restarting each time.

At the end the target must hold every note exactly once, with the same text and spans a clean,
uninterrupted run produces.  Moments range from interpreter start-up and the Alembic migration of
the first run to the middle of batch transactions; small batches make the latter frequent.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import sqlalchemy as sa

from anonymizer.config import load_config
from anonymizer.run import run
from tests.conftest import create_hospital
from tests.servers import anonymized, check_every_note_once, query, write_config

SEED = 20261122
KILLS = 20
GIVEN = ["Antonette", "Ravi", "Siti", "Wei Ming", "José", "Siobhan", "Nur Aisyah", "Kumaravel", "Mei Ling", "Oluwaseun"]
FAMILY = ["Brucer", "Kumar", "binte Ali", "Tan", "O'Brien", "Lim", "Rahman", "Fernandes", "Goh", "Adeyemi"]


def hospital(rng: random.Random, patients: int = 60, notes: int = 2000) -> tuple[list[dict], list[dict]]:
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
    command = [sys.executable, "-m", "anonymizer", "run", "--config", str(config), "--batch-size", "20"]
    poll = databases.engine(target)
    moments = []
    for _ in range(KILLS):
        before = count(poll)
        # Half the moments are a random time after start (start-up, migration, first batch), half a
        # random number of notes into the run plus a random delay (mid-batch, mid-transaction).
        wait_rows = 0 if rng.random() < 0.5 else rng.randint(1, 100)
        delay = rng.uniform(0.0, 1.5) if wait_rows == 0 else rng.uniform(0.0, 0.2)
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while wait_rows and count(poll) < before + wait_rows and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(delay)
        alive = process.poll() is None
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        moments.append((alive, count(poll) - before))
    killed_mid_run = sum(alive for alive, _ in moments)
    progressed = count(poll)
    assert killed_mid_run >= KILLS - 2, moments
    assert 0 < progressed < len(notes), "the kills must interrupt the run, not follow its end"

    finish = subprocess.run(command, capture_output=True, text=True)
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
          f"written before the final run, {len(statuses)} runs recorded; target == clean run")
