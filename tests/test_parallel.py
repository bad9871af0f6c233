"""The process pool: the output of a run is the same with one worker and with two."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import random
import shutil
import signal
import threading
import time
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from types import SimpleNamespace

import pytest
import sqlalchemy as sa

from anonymizer.config import load_config
from anonymizer.parallel import Pool, shards
from anonymizer.record import Note, PatientRecord
from anonymizer.run import reprocess, run
from anonymizer.source import Batch
from tests.conftest import CONFIG, NOTES, create_hospital

ROOT = Path(__file__).resolve().parents[1]


def rows(url: str) -> tuple[list[tuple], list[tuple], list[tuple]]:
    """The target's notes, spans and failures, without run ids (they number runs, not content)."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        notes = conn.execute(sa.text("SELECT note_id, patient_id, text, source_digest FROM anonymized_notes ORDER BY note_id")).all()
        spans = conn.execute(sa.text("SELECT note_id, start, \"end\", category, detectors FROM phi_spans ORDER BY note_id, start")).all()
        failures = conn.execute(sa.text("SELECT note_id, patient_id, reason FROM failures ORDER BY note_id")).all()
        digests = conn.execute(sa.text("SELECT patient_id, record_digest FROM patient_digests ORDER BY patient_id")).all()
    engine.dispose()
    return notes, spans, failures + digests


def with_target(config, path: Path):
    return dataclasses.replace(config, target=dataclasses.replace(config.target, url=f"sqlite:///{path}"))


@pytest.fixture
def bigger_hospital(tmp_path: Path) -> Path:
    """The test hospital with enough notes, patients interleaved, for several batches and shards."""
    rng = random.Random(7)
    bodies = [n["body"] for n in NOTES]
    notes = [dict(note_id=100 + i, patient_id=rng.choice([1, 2, 3, 4]), body=f"{rng.choice(bodies)} (note {i})") for i in range(240)]
    source, target = tmp_path / "hospital.db", tmp_path / "target.db"
    create_hospital(f"sqlite:///{source}", notes=NOTES + notes)
    config = tmp_path / "anonymizer.toml"
    config.write_text(CONFIG.format(source=source, target=target))
    return config


def test_one_and_two_workers_write_identical_output(bigger_hospital, tmp_path):
    config = load_config(bigger_hospital)
    one = run(with_target(config, tmp_path / "one.db"), batch_size=37, workers=1)
    two = run(with_target(config, tmp_path / "two.db"), batch_size=37, workers=2)
    assert (one.notes, one.done, one.failed, one.spans) == (two.notes, two.done, two.failed, two.spans)
    assert one.done == len(NOTES) + 240
    assert rows(f"sqlite:///{tmp_path / 'one.db'}") == rows(f"sqlite:///{tmp_path / 'two.db'}")


def test_the_sample_database_is_identical_with_one_and_two_workers(tmp_path):
    config = load_config(ROOT / "sample_db" / "anonymizer.toml")
    lists = tuple(dataclasses.replace(item, file=str(ROOT / item.file)) if item.file else item for item in config.lists)
    source = dataclasses.replace(config.source, url=f"sqlite:///{ROOT / 'sample_db' / 'hospital.db'}")
    # Rules only unless a model is shipped: the classifier is tested for equality by its owner.
    from anonymizer.classifier.model import DEFAULT_MODEL

    classifier = dataclasses.replace(config.classifier, enabled=DEFAULT_MODEL.is_file())
    config = dataclasses.replace(config, source=source, lists=lists, classifier=classifier)
    run(with_target(config, tmp_path / "one.db"), limit=600, workers=1)
    run(with_target(config, tmp_path / "two.db"), limit=600, workers=2)
    one, two = rows(f"sqlite:///{tmp_path / 'one.db'}"), rows(f"sqlite:///{tmp_path / 'two.db'}")
    assert len(one[0]) == 600 and len(one[1]) > 600
    assert one == two


def test_a_rerun_with_workers_skips_what_one_worker_wrote(bigger_hospital):
    config = load_config(bigger_hospital)
    first = run(config, batch_size=50, workers=1)
    second = run(config, batch_size=50, workers=2)
    assert second.skipped == first.done and second.done == 0


def test_reprocess_is_identical_with_one_and_two_workers(bigger_hospital, tmp_path):
    config = load_config(bigger_hospital)
    run(with_target(config, tmp_path / "one.db"), workers=1)
    shutil.copy(tmp_path / "one.db", tmp_path / "two.db")
    a = reprocess(with_target(config, tmp_path / "one.db"), ["1", "2", "3", "9"], workers=1)
    b = reprocess(with_target(config, tmp_path / "two.db"), ["1", "2", "3", "9"], workers=2)
    assert (a.done, a.no_record) == (b.done, b.no_record)
    assert rows(f"sqlite:///{tmp_path / 'one.db'}") == rows(f"sqlite:///{tmp_path / 'two.db'}")


def test_shards_keep_patients_together_and_in_order():
    notes = [Note(str(i), pid, "x") for i, pid in enumerate("aaabbcddddde")]
    batch = Batch(notes, {pid: PatientRecord(pid) for pid in "abcde"})
    parts = shards(batch, 4)
    assert [n for part in parts for n in part.notes] == notes
    seen: set[str] = set()
    for part in parts:
        pids = {n.patient_id for n in part.notes}
        assert not pids & seen and set(part.records) == pids
        seen |= pids
    assert len(parts) > 1


def test_workers_are_spawned_when_another_thread_runs():
    """A thread that holds a stream's lock while the process forks would leave it held in the
    worker: beside another thread the pool spawns its workers, never forks them."""
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        pool = Pool(None, SimpleNamespace(digest="d"), 2)  # type: ignore[arg-type]
        assert pool.start_method == "spawn"
        pool.close()
    finally:
        stop.set()
        other.join()


def pool_of_two() -> Pool:
    """A pool whose workers hold a stand-in pipeline: the tasks below need none."""
    pool = Pool(None, SimpleNamespace(digest="d"), 2)  # type: ignore[arg-type]
    assert pool.start_method == "fork"  # the stand-in cannot be rebuilt in a spawned worker
    return pool


def test_a_task_s_error_is_raised_by_its_future_and_the_pool_goes_on():
    with pool_of_two() as pool:
        bad, good = pool.submit(int, "x"), pool.submit(int, "7")
        with pytest.raises(ValueError):
            bad.result()
        assert good.result() == 7


def test_a_worker_killed_while_sending_its_result_fails_every_task_instead_of_hanging():
    """The OOM killer at any moment, most often halfway through a large result on its way back."""
    rng = random.Random(3)
    for _ in range(5):
        with pytest.raises(BrokenProcessPool):
            with pool_of_two() as pool:
                futures = [pool.submit(bytes, 32 * 2**20) for _ in range(12)]
                futures[0].result()
                time.sleep(rng.uniform(0.0, 0.05))
                os.kill(multiprocessing.active_children()[0].pid, signal.SIGKILL)
                for future in futures:
                    future.result(timeout=120)  # a hang guard, not a timing: BrokenProcessPool comes first
                pytest.fail("every task finished although a worker was killed")
        with pytest.raises(BrokenProcessPool):
            pool.submit(int, "1")
