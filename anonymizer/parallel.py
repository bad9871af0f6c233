"""Every core: the per-patient unit of work in a process pool, one writer in the main process.

The main process reads the source and writes the target exactly as a one-process run does; only
:func:`anonymizer.worker.process_batch` (for ``run``, and for ``reprocess`` with nothing skipped)
moves to the workers:

- each worker builds its pipeline once, in the pool's initializer, from the configuration (rules,
  lists, model: :func:`anonymizer.worker.prepare`), and checks that its digest is the main process's;
- a batch is split into shards of whole patient groups (a patient's notes of a batch stay
  together, as :func:`~anonymizer.worker.process_batch` groups them), each shard is one task;
- results come back in submission order, and the main process writes each batch in one target
  transaction in source order, so the skip logic, the bookkeeping and the resumability after a
  crash are those of a one-process run, and the output is identical for any number of workers.

A few batches are in flight at a time, so memory stays bounded however large the source.  The
digests of already written notes (the skip logic) are read before a batch is submitted; a batch
holding a note id (as the target keys it) of a batch still in flight (two source rows with one id)
waits until that batch is written, so it sees what a one-process run would.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import pickle
import signal
import sys
import threading
from collections import deque
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.connection import Connection, wait
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence

from anonymizer.record import Note
from anonymizer.source import Batch
from anonymizer.worker import prepare, process_batch

if TYPE_CHECKING:
    from anonymizer.config import Config
    from anonymizer.pipeline import Pipeline
    from anonymizer.record import NoteResult
    from anonymizer.source import Source
    from anonymizer.target import Held, Target

BATCHES_AHEAD = 2  # batches submitted beyond the one being written
SHARDS_PER_WORKER = 2  # per batch: enough to keep every worker busy when patients differ in size
BROKEN = "a worker process ended abruptly"

_pipeline: "Pipeline | None" = None  # the worker's own, built once by _init


def default_workers() -> int:
    """The number of cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


# --- in the workers ---------------------------------------------------------------------------


def _init(config: "Config", digest: str) -> None:
    """Pool initializer (spawn): build the pipeline once for this worker, exactly as the main process did."""
    source, pipeline = prepare(config)
    source.engine.dispose()  # lists are read; the worker never touches a database again
    if pipeline.digest != digest:
        # The rules, lists or model changed between the main process's start and this worker's.
        raise RuntimeError("worker pipeline differs from the main process's (rules, lists or model changed)")
    _adopt(pipeline)


def _adopt(pipeline: "Pipeline") -> None:
    """Pool initializer (fork, and the end of _init): use `pipeline`, and leave with the parent."""
    global _pipeline
    _pipeline = pipeline
    _exit_with_parent()


def _exit_with_parent() -> None:
    """Leave when the main process dies (kill -9): an orphaned worker would wait for work forever.

    The parent's pid comes from multiprocessing, not getppid(): a parent killed while this worker
    was still starting has already left it to init, and getppid() would then watch init forever.
    """
    parent = multiprocessing.parent_process().pid

    def watch() -> None:
        while True:
            threading.Event().wait(1.0)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _process_shard(batch: Batch, written: dict[str, str]) -> list["NoteResult"]:
    assert _pipeline is not None, "worker not initialised"
    return process_batch(batch, _pipeline, lambda note_id, digest: written.get(note_id) == digest)


# --- in the main process ----------------------------------------------------------------------


class Pool:
    """Worker processes that each hold `pipeline` (or, where they cannot fork, one built from `config`).

    Each worker has a pipe of its own, and one task at a time; a thread in the main process hands
    out the tasks and reads the results.  Not :class:`concurrent.futures.ProcessPoolExecutor`: its
    workers write their results into one shared pipe, and a worker killed halfway through writing
    one (the OOM killer, kill -9) leaves its reading thread waiting for the rest forever, so the
    run hangs.  Here the death of a worker ends its own pipe, and every unfinished task fails with
    :class:`BrokenProcessPool` at once.
    """

    def __init__(self, config: "Config", pipeline: "Pipeline", workers: int) -> None:
        self.workers = workers
        if sys.platform == "linux" and threading.active_count() == 1:
            # fork: a worker starts with the main process's pipeline, built and checked already
            # (about 2 CPU-seconds of imports, rules and model per worker saved).  It inherits the
            # database connections too, but never uses them.  Only from a process with no other
            # thread (the workers fork at the first submit, before the pool's own thread; the CLI
            # starts its progress bar after that): a thread writing to stderr while the process
            # forks would leave the stream's lock held in the worker for good (CPython issue
            # 84579), and the worker would hang at its first log line.
            self._context, self._init = multiprocessing.get_context("fork"), (_adopt, (pipeline,))
        else:  # spawn (fork is unsafe on macOS, and beside other threads): each worker builds its own pipeline
            self._context, self._init = multiprocessing.get_context("spawn"), (_init, (config, pipeline.digest))
        self.start_method = self._context.get_start_method()
        self._lock = threading.Lock()  # guards the queue and the two flags, shared with the thread
        self._queue: deque[tuple[Future, bytes]] = deque()
        self._closing = self._broken = False
        self._processes: list[multiprocessing.process.BaseProcess] = []
        self._thread: threading.Thread | None = None
        self._wake_reader, self._wake_writer = self._context.Pipe(duplex=False)

    def submit(self, fn: Callable, *args: object) -> Future:
        future: Future = Future()
        task = pickle.dumps((fn, args), pickle.HIGHEST_PROTOCOL)  # here, so the thread only sends bytes
        with self._lock:
            if self._broken:
                raise BrokenProcessPool(BROKEN)
            if self._closing:
                raise RuntimeError("the pool is closed")
            self._queue.append((future, task))
        if self._thread is None:
            self._start()
        self._wake_writer.send_bytes(b"")
        return future

    def _start(self) -> None:
        pipes = []
        for _ in range(self.workers):
            ours, theirs = self._context.Pipe()
            process = self._context.Process(target=_serve, args=(theirs, *self._init), name="anonymizer-worker", daemon=True)
            process.start()
            theirs.close()  # the worker's end is the worker's alone: its pipe ends when it does
            self._processes.append(process)
            pipes.append(ours)
        self._thread = threading.Thread(target=self._hand_out, args=(pipes,), name="anonymizer-pool", daemon=True)
        self._thread.start()

    def _hand_out(self, pipes: list[Connection]) -> None:
        """The pool's thread: give each idle worker the next task, and each result to its future."""
        idle, busy = list(pipes), dict[Connection, Future]()
        sentinels = {process.sentinel for process in self._processes}
        try:
            while True:
                while idle:
                    with self._lock:
                        if not self._queue:
                            break
                        future, task = self._queue.popleft()
                    if future.set_running_or_notify_cancel():
                        pipe = idle.pop()
                        pipe.send_bytes(task)
                        busy[pipe] = future
                with self._lock:
                    if self._closing and not busy and not self._queue:
                        break
                for ready in wait([*busy, self._wake_reader, *sentinels]):
                    if ready in busy:
                        ok, value = pickle.loads(ready.recv_bytes())
                        future = busy.pop(ready)
                        if ok:
                            future.set_result(value)
                        else:
                            future.set_exception(value)
                        idle.append(ready)
                    elif ready is self._wake_reader:
                        while self._wake_reader.poll():
                            self._wake_reader.recv_bytes()
                    else:  # a worker's process ended, between tasks or during one
                        raise EOFError
            for pipe in pipes:
                pipe.send_bytes(pickle.dumps(None))  # the worker's signal to leave
        except Exception:  # a worker ended (its pipe closed, its process gone), or a reply did not unpickle
            with self._lock:
                self._broken = True
                futures = [*busy.values(), *(future for future, _ in self._queue)]
                self._queue.clear()
            for process in self._processes:
                process.kill()
            for future in futures:
                if not future.done():
                    future.set_exception(BrokenProcessPool(BROKEN))
        finally:
            for pipe in pipes:
                pipe.close()

    def close(self, cancel: bool = False) -> None:
        """Wait for every task submitted, or (`cancel`) drop those not done and end the workers now."""
        with self._lock:
            self._closing = True
            dropped = list(self._queue) if cancel else []
            if cancel:
                self._queue.clear()
        for future, _ in dropped:
            future.cancel()
        if self._thread is not None:
            if cancel:
                for process in self._processes:
                    process.kill()
            self._wake_writer.send_bytes(b"")
            self._thread.join()
        for process in self._processes:
            process.join()
        self._wake_reader.close()
        self._wake_writer.close()

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        self.close(cancel=kind is not None)


def _serve(pipe: Connection, initializer: Callable, initargs: tuple) -> None:
    """A worker: run each task the pipe brings, and send back (True, result) or (False, exception)."""
    for stop in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C and a scheduler's stop are the main process's to handle
        signal.signal(stop, signal.SIG_IGN)
    initializer(*initargs)
    while (task := pipe.recv()) is not None:
        fn, args = task
        try:
            reply = pickle.dumps((True, fn(*args)), pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # the task's own error, raised again in the main process
            try:
                reply = pickle.dumps((False, exc), pickle.HIGHEST_PROTOCOL)
            except Exception:  # an exception that does not pickle
                reply = pickle.dumps((False, RuntimeError(f"{type(exc).__name__} in a worker")))
        pipe.send_bytes(reply)


def shards(batch: Batch, parts: int) -> list[Batch]:
    """Split a batch into at most `parts` shards of consecutive whole patient groups, in order."""
    groups = [list(g) for _, g in itertools.groupby(batch.notes, key=lambda n: n.patient_id)]
    size = max(1, -(-len(batch.notes) // max(1, parts)))  # notes per shard, rounded up
    out: list[Batch] = []
    current: list[Note] = []
    for group in groups:
        current.extend(group)
        if len(current) >= size:
            out.append(_sub_batch(batch, current))
            current = []
    if current:
        out.append(_sub_batch(batch, current))
    return out


def _sub_batch(batch: Batch, notes: list[Note]) -> Batch:
    return Batch(notes, {pid: batch.records[pid] for pid in dict.fromkeys(n.patient_id for n in notes)})


def processed_batches(
    batches: Iterable[Batch],
    pipeline: "Pipeline",
    target: "Target | None",
    config: "Config",
    workers: int = 1,
) -> Iterator[tuple[Batch, list["NoteResult"], dict[str, "Held"]]]:
    """(batch, results, what the target held under its note ids) for every batch in source order;
    the caller writes each batch.  A note whose digest the target holds gets no result (skipped).

    With one worker this is the one-process loop itself; with more, the batches' shards run in a
    pool while the caller writes the previous batch.
    """
    key = target.key if target else str

    def held_by(batch: Batch) -> tuple[dict[str, "Held"], dict[str, str]]:
        """What the target holds under the batch's ids, and the digests of its notes already written."""
        held = target.digests(n.note_id for n in batch.notes) if target else {}
        written = {}
        for note in batch.notes:
            digest = held[key(note.note_id)].digest if key(note.note_id) in held else None
            if digest is not None:
                written[note.note_id] = digest
        return held, written

    if workers <= 1:
        for batch in batches:
            held, written = held_by(batch)
            yield batch, process_batch(batch, pipeline, lambda nid, digest: written.get(nid) == digest), held
        return
    with Pool(config, pipeline, workers) as pool:
        pending: deque[tuple[Batch, list[Future], dict[str, "Held"], set[str]]] = deque()
        in_flight: set[str] = set()

        def collect() -> tuple[Batch, list["NoteResult"], dict[str, "Held"]]:
            batch, futures, held, ids = pending.popleft()
            results = [result for future in futures for result in future.result()]  # submission order
            in_flight.difference_update(ids)
            return batch, results, held

        for batch in batches:
            ids = {key(n.note_id) for n in batch.notes}
            # A note id still in flight (two source rows with one id): its earlier copy must be
            # written first, or neither the skip check nor the shared-id check would see it.
            while pending and not ids.isdisjoint(in_flight):
                yield collect()
            held, written = held_by(batch)
            futures = [
                pool.submit(_process_shard, shard, {n.note_id: written[n.note_id] for n in shard.notes if n.note_id in written})
                for shard in shards(batch, workers * SHARDS_PER_WORKER)
            ]
            pending.append((batch, futures, held, ids))
            in_flight |= ids
            while len(pending) > BATCHES_AHEAD:
                yield collect()
        while pending:
            yield collect()


def processed_patients(
    source: "Source",
    patients: Sequence[str],
    pipeline: "Pipeline",
    config: "Config",
    workers: int = 1,
) -> Iterator[tuple[str, Batch, list["NoteResult"]]]:
    """(patient id, its notes and records, results) per patient in order, for ``reprocess``.

    The notes are those the source database matches to the id (which may spell it otherwise);
    their records come with them, and the id's own record when it has no note.
    """

    def read(pid: str) -> Batch:
        notes, records = [], {}
        for batch in source.batches(config.run.batch_size, patient_ids=[pid]):
            notes.extend(batch.notes)
            records.update(batch.records)
        return Batch(notes, records or source.records([pid]))

    if workers <= 1:
        for pid in patients:
            batch = read(pid)
            yield pid, batch, process_batch(batch, pipeline, lambda nid, digest: False)
        return
    with Pool(config, pipeline, workers) as pool:
        pending: deque[tuple[str, Batch, Future]] = deque()
        ahead = workers * SHARDS_PER_WORKER * 2
        for pid in patients:
            batch = read(pid)
            pending.append((pid, batch, pool.submit(_process_shard, batch, {})))
            while len(pending) > ahead:
                pid_, batch_, future = pending.popleft()
                yield pid_, batch_, future.result()
        while pending:
            pid_, batch_, future = pending.popleft()
            yield pid_, batch_, future.result()
