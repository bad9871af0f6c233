"""The review loop measured on the sample database, with reviews simulated from its gold file.

A simulated reviewer marks, in each note of a sample, every gold span the run did not wholly
remove as *missed* and every detection that covers no gold token as *wrong*, then accepts the note.

    python benchmarks/review_loop.py retrain [--physionet DIR] [--sizes 100,400]
    python benchmarks/review_loop.py coverage [--seeds 50] [--n 100]
    python benchmarks/review_loop.py screenshots [--evaluation F] [--out docs]

``retrain``: does training on the reviews raise recall on notes outside them?  The sample's
patients are split in 5 folds; for each fold, `size` notes of the other folds' patients are
reviewed (marks stored in a target and read back as ``anonymizer train --reviews`` reads them), a
model is trained on the PhysioNet tuning part (the lockbox is never read) plus those reviewed notes,
and the fold's notes are scored with it.  Before: the same training without reviews.  Union of rules
and classifier, token recall and precision over all notes, each scored by a model that saw neither
it nor its patient.

``coverage``: does the release estimate's 95 % interval, from `n` reviewed notes, cover the recall
of the run over the whole gold file?  Over `seeds` random samples, for the Korn–Graubard interval
of ``anonymizer audit estimate``, for Wilson on tokens taken as independent, and for a note-level
cluster bootstrap.

``screenshots``: the pictures of docs/review.md, of the review page over the sample database with
30 notes of a 100-note sample reviewed (needs Debian's Chromium and Playwright); ``--evaluation``:
the report of ``anonymizer evaluate sample_db/gold.jsonl --cv 5 --json F``, for the dashboard's curve.

Prints figures only, never note text.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from sklearn.model_selection import GroupKFold

from anonymizer.config import TargetConfig, load_config
from anonymizer.corpora import load_corpus, merge_lists, split_lockbox
from anonymizer.review import marks
from anonymizer.review.estimate import estimate, wilson
from anonymizer.review.gold import ReviewedNote, note_counts, reviewed_corpus, reviewed_gold
from anonymizer.run import run
from anonymizer.scoring import overlap_mask, tokenize
from anonymizer.target import Target

ROOT = Path(__file__).resolve().parents[1]
REVIEWER = "simulated"


def anonymized_sample(folder: Path):
    """The sample database anonymized into a new target in `folder`: (config, target, gold corpus)."""
    config = load_config(ROOT / "sample_db" / "anonymizer.toml")
    config = dataclasses.replace(config, target=TargetConfig(f"sqlite:///{folder / 'anonymized.db'}"))
    run(config, workers=2)
    return config, Target(config.target.url, create=False), load_corpus(ROOT / "sample_db" / "gold.jsonl")


def simulated_marks(text: str, gold: tuple, detections: list[tuple[int, int, str, str]]) -> list[tuple[int, int, str, str]]:
    """(start, end, category, verdict) a reviewer who knows the gold would mark."""
    starts, ends = tokenize(text)
    found = overlap_mask(starts, ends, [d[:3] for d in detections])
    out = []
    for start, end, category in gold:
        inside = [i for i, (s, e) in enumerate(zip(starts, ends)) if s < end and e > start]
        if inside and any(found[i] is None for i in inside):
            out.append((start, end, category, "missed"))
    for start, end, category, _ in detections:
        if not any(s < end and e > start for s, e, _ in gold):
            out.append((start, end, category, "wrong"))
    return out


def review(target: Target, notes) -> None:
    """Store the simulated reviewer's marks and acceptances of these notes in the target."""
    found = marks.detections(target, [n.note_id for n in notes])
    for note in notes:
        for start, end, category, verdict in simulated_marks(note.text, note.spans, found[note.note_id]):
            marks.add_mark(target, note.note_id, start, end, category, verdict, REVIEWER, len(note.text))
        marks.accept(target, note.note_id, REVIEWER, note.text, sampled=True)


def retrain(args: argparse.Namespace) -> None:
    from anonymizer.classifier.crossval import held_out
    from anonymizer.classifier.training import TrainingOptions, build_dataset, rule_pipeline

    with tempfile.TemporaryDirectory() as tmp:
        config, target, gold = anonymized_sample(Path(tmp))
        tuning = split_lockbox(load_corpus(args.physionet))[0]
        groups = [n.patient_id for n in gold.notes]
        folds = list(GroupKFold(5).split(np.zeros(len(gold.notes)), groups=groups))
        samples: dict[int, list[list[str]]] = {}
        for size in args.sizes:
            samples[size] = []
            for fold, (train_idx, _) in enumerate(folds):
                chosen = random.Random(fold).sample(list(train_idx), min(size, len(train_idx)))
                samples[size].append([gold.notes[i].note_id for i in chosen])
        wanted = {note_id for per_size in samples.values() for ids in per_size for note_id in ids}
        review(target, [n for n in gold.notes if n.note_id in wanted])
        reviewed = reviewed_corpus(config, target)
        counted = marks.marks(target, wanted)
        verdicts = [m.verdict for ms in counted.values() for m in ms]
        print(f"sample database: {len(gold.notes)} notes of {len(set(groups))} patients; training base: PhysioNet tuning part, "
              f"{len(tuning.notes)} notes; simulated reviews of {len(reviewed.notes)} distinct notes: "
              f"{verdicts.count('missed')} missed and {verdicts.count('wrong')} wrong marks", flush=True)

        options = TrainingOptions()
        pipeline = rule_pipeline(merge_lists(tuning.lists, gold.lists))
        started = time.perf_counter()
        dataset = build_dataset([tuning, reviewed, gold], options.feature_classes, pipeline.rule_spans, options.confirm)
        base = list(range(len(tuning.notes)))
        at = {n.note_id: len(tuning.notes) + k for k, n in enumerate(reviewed.notes)}
        first = len(tuning.notes) + len(reviewed.notes)
        scored = lambda idx: [first + i for i in idx]  # noqa: E731
        print(f"features built in {time.perf_counter() - started:.0f} s", flush=True)

        def figures(splits) -> dict:
            counts = held_out(dataset, splits, options, pipeline.rule_spans, pipeline.excused).counts("union")
            return {"row": counts.row(), "categories": counts.categories()}

        results = {"before": figures([(base, scored(range(len(gold.notes))))])}
        for size in args.sizes:
            splits = [(base + [at[i] for i in samples[size][f]], scored(test)) for f, (_, test) in enumerate(folds)]
            results[f"after {size}"] = figures(splits)
            print(f"trained and scored with {size} reviewed notes per fold", flush=True)
        print("\nunion, 5 folds by patient ('after N': N reviewed notes of the other folds' patients added to training)")
        print(f"{'':10} {'recall':>7} {'precision':>9} {'phrase R':>8} {'FN':>5} {'FP':>5}")
        for name, r in results.items():
            row = r["row"]
            print(f"{name:10} {row['recall']:7.4f} {row['precision']:9.4f} {row['phrase_recall']:8.4f} {row['fn']:5d} {row['fp']:5d}")
        print("\nrecall per category:")
        print(f"{'category':10} {'tokens':>7} " + " ".join(f"{name:>10}" for name in results))
        for category, first_row in results["before"]["categories"].items():
            if first_row["gold_tokens"]:
                cells = " ".join(f"{r['categories'][category]['recall']:10.4f}" for r in results.values())
                print(f"{category:10} {first_row['gold_tokens']:7d} {cells}")


def coverage(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _, target, gold = anonymized_sample(Path(tmp))
        found = marks.detections(target, [n.note_id for n in gold.notes])
    truth_notes = [ReviewedNote(n.note_id, n.patient_id, n.text, tuple(d[:3] for d in found[n.note_id]), n.spans, True, ())
                   for n in gold.notes]
    totals = np.array(note_counts(truth_notes))
    truth = 1 - totals[:, 1].sum() / totals[:, 0].sum()
    print(f"whole gold file: {len(gold.notes)} notes, {totals[:, 0].sum():,} PHI tokens, {totals[:, 1].sum():,} missed by the run: "
          f"recall {truth:.4f}")
    reviewed = []
    for note in gold.notes:
        rows = [marks.Mark(0, note.note_id, s, e, c, marks.DETECTED, REVIEWER, None) for s, e, c, _ in found[note.note_id]]
        simulated = simulated_marks(note.text, note.spans, found[note.note_id])
        rows += [marks.Mark(0, note.note_id, s, e, c, v, REVIEWER, None) for s, e, c, v in simulated]
        detected, reviewed_spans = reviewed_gold(rows, [REVIEWER])
        reviewed.append(ReviewedNote(note.note_id, note.patient_id, note.text, detected, reviewed_spans, True, (REVIEWER,)))
    per_note = np.array(note_counts(reviewed))
    covered = {"Korn–Graubard (anonymizer audit estimate)": 0, "Wilson, tokens independent": 0, "cluster bootstrap, percentile": 0}
    widths = {k: [] for k in covered}
    estimates = []
    for seed in range(args.seeds):
        pick = random.Random(seed).sample(range(len(reviewed)), args.n)
        counts = per_note[pick]
        e = estimate([tuple(c) for c in counts])
        estimates.append(e.recall)
        g, m = counts[:, 0].astype(float), counts[:, 1].astype(float)
        rng = np.random.default_rng(seed)
        draws = rng.integers(0, len(counts), size=(2000, len(counts)))
        boot = 1 - m[draws].sum(axis=1) / g[draws].sum(axis=1)
        intervals = {
            "Korn–Graubard (anonymizer audit estimate)": e.interval,
            "Wilson, tokens independent": wilson(g.sum() - m.sum(), g.sum()),
            "cluster bootstrap, percentile": tuple(np.percentile(boot, [2.5, 97.5])),
        }
        for name, (low, high) in intervals.items():
            covered[name] += low <= truth <= high
            widths[name].append(high - low)
    print(f"{args.seeds} random samples of {args.n} notes, reviews simulated from the gold file: sample recall "
          f"{np.mean(estimates):.4f} on average (min {min(estimates):.4f}, max {max(estimates):.4f})")
    for name, hits in covered.items():
        print(f"  {name:44} covers the whole file's recall in {hits} of {args.seeds} ({hits / args.seeds:.0%}); "
              f"mean width {np.mean(widths[name]):.4f}")


def screenshots(args: argparse.Namespace) -> None:
    import json
    import threading

    from playwright.sync_api import sync_playwright

    from anonymizer.review.app import make_server

    with tempfile.TemporaryDirectory() as tmp:
        config, target, gold = anonymized_sample(Path(tmp))
        queue = marks.sample_queue(target, 100, 1)
        by_id = {n.note_id: n for n in gold.notes}
        review(target, [by_id[i] for i in queue.note_ids[:30]])
        found = marks.detections(target, queue.note_ids)
        simulated = {i: simulated_marks(by_id[i].text, by_id[i].spans, found[i]) for i in queue.note_ids}
        shown = next(i for i in queue.note_ids[30:] if len({v for *_, v in simulated[i]}) == 2)  # a missed and a wrong span
        for start, end, category, verdict in simulated[shown]:
            marks.add_mark(target, shown, start, end, category, verdict, "reviewer A", len(by_id[shown].text))
        evaluation = json.loads(args.evaluation.read_text()) if args.evaluation else None
        server, sock, url = make_server(config, target, queue, reviewer="reviewer A", evaluation=evaluation)
        thread = threading.Thread(target=server.run, kwargs=dict(sockets=[sock]), daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.05)
        base = url.split("/?")[0]
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=[
                "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--no-first-run"])
            page = browser.new_page(viewport={"width": 1360, "height": 860})
            page.goto(url)
            page.goto(f"{base}/note?id={shown}")
            page.locator("#source .det").nth(1).click()  # its explanation, and what a reviewer can do with it
            page.screenshot(path=str(args.out / "review-note.png"), full_page=True)
            page.goto(f"{base}/dashboard")
            page.screenshot(path=str(args.out / "review-dashboard.png"), full_page=True)
            browser.close()
        server.should_exit = True
        thread.join(10)
    print(f"note {shown} and the dashboard written to {args.out}/review-note.png, review-dashboard.png")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    one = commands.add_parser("retrain")
    one.add_argument("--physionet", type=Path, default=ROOT.parent / "shared" / "corpora" / "physionet-nursing")
    one.add_argument("--sizes", type=lambda v: [int(x) for x in v.split(",")], default=[100, 400])
    two = commands.add_parser("coverage")
    two.add_argument("--seeds", type=int, default=50)
    two.add_argument("--n", type=int, default=100)
    three = commands.add_parser("screenshots")
    three.add_argument("--evaluation", type=Path)
    three.add_argument("--out", type=Path, default=ROOT / "docs")
    args = parser.parse_args(argv)
    {"retrain": retrain, "coverage": coverage, "screenshots": screenshots}[args.command](args)


if __name__ == "__main__":
    main(sys.argv[1:])
