"""How a rule for choosing the threshold does on patients it did not choose on: the tuning part only.

    python benchmarks/threshold_rules.py [--corpus DIR] [--folds 10]

A nested cross-validation of the tuning part (the lockbox's patients left out:
anonymizer.corpora.split_lockbox), grouped by patient.  For each outer fold, each rule chooses a
threshold from an inner cross-validation of the other folds' patients (K - 1 models trained and
scored as ``anonymizer evaluate --tuning --cv`` does); the outer fold is then scored, by a model
trained on all the other folds' patients, at the threshold each rule chose without it.  The
table sums the outer folds.  A rule that chooses well on the patients it sees and badly on the
ones it does not shows it here, before any lockbox is scored.  K x K models: about 20 minutes for
K = 10 on two cores.

Rules (each among the thresholds of anonymizer.scoring.CURVE_THRESHOLDS up to 0):
  lowest-of-tie   the highest recall with union precision >= 0.85, the lowest threshold of a tie
  highest-of-tie  the same recall, the highest threshold reaching it (the rule that chose the
                  shipped threshold: docs/accuracy.md)
  best-f2         the best F2 (recall weighted four times precision)
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpora" / "physionet-nursing"
FLOOR = 0.85  # the precision the rule keeps on the tuning part


def union_counts(result, thresholds: Sequence[float]) -> dict[float, tuple[int, int, int]]:
    """Per threshold, the union's (TP, FP, FN) tokens over the result's notes (CVResult.counts)."""
    out = {}
    for th in thresholds:
        c = result.counts("union", th)
        out[th] = (c.tp, c.fp, c.fn)
    return out


def rates(tp: int, fp: int, fn: int) -> tuple[float, float]:
    return tp / (tp + fn) if tp + fn else 0.0, tp / (tp + fp) if tp + fp else 0.0


def tie_rule(lowest: bool) -> Callable[[dict[float, tuple[int, int, int]]], float]:
    """The highest recall with precision >= FLOOR, the lowest (or highest) threshold of a tie;
    where no threshold keeps the floor, the highest threshold (the most precise)."""

    def choose(totals: dict[float, tuple[int, int, int]]) -> float:
        allowed = {th: rates(*c) for th, c in totals.items() if rates(*c)[1] >= FLOOR} or {max(totals): rates(*totals[max(totals)])}
        best = max(r for r, _ in allowed.values())
        tied = [th for th, (r, _) in allowed.items() if r == best]
        return min(tied) if lowest else max(tied)

    return choose


def best_f2(totals: dict[float, tuple[int, int, int]]) -> float:
    def f2(th: float) -> float:
        r, p = rates(*totals[th])
        return 5 * p * r / (4 * p + r) if p + r else 0.0

    return max(sorted(totals), key=f2)


RULES = {"lowest-of-tie": tie_rule(lowest=True), "highest-of-tie": tie_rule(lowest=False), "best-f2": best_f2}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--folds", type=int, default=10)
    args = parser.parse_args()

    import numpy as np
    from sklearn.model_selection import GroupKFold

    from anonymizer.classifier.crossval import held_out
    from anonymizer.classifier.training import TrainingOptions, build_dataset
    from anonymizer.corpora import load_corpus, split_lockbox
    from anonymizer.pipeline import build_pipeline
    from anonymizer.scoring import CURVE_THRESHOLDS
    from anonymizer.settings import ClassifierConfig, DetectorsConfig

    tuning = split_lockbox(load_corpus(args.corpus))[0]
    pipeline = build_pipeline(DetectorsConfig(), tuning.lists, ClassifierConfig(enabled=False))
    options = TrainingOptions()
    dataset = build_dataset([tuning], options.feature_classes, pipeline.rule_spans, options.confirm)
    thresholds = [th for th in CURVE_THRESHOLDS if th <= 0]
    groups = np.asarray(dataset.groups)

    def score(splits: list) -> dict[float, tuple[int, int, int]]:
        return union_counts(held_out(dataset, splits, options, pipeline.rule_spans, pipeline.excused), thresholds)

    chosen: dict[str, list[float]] = {name: [] for name in RULES}
    totals = {name: [0, 0, 0] for name in RULES}
    for train, test in GroupKFold(args.folds).split(np.zeros(len(groups)), groups=groups):
        inner = [(train[a], train[b]) for a, b in GroupKFold(args.folds - 1).split(train, groups=groups[train])]
        seen = score(inner)
        outer = score([(train, test)])
        for name, rule in RULES.items():
            th = rule(seen)
            chosen[name].append(th)
            totals[name] = [a + b for a, b in zip(totals[name], outer[th])]

    print(f"tuning part: {len(dataset.notes)} notes, nested {args.folds}-fold cross-validation by patient; union tokens of")
    print("each outer fold at the threshold the rule chose on the other folds' patients\n")
    print("| rule | thresholds chosen | recall | precision | TP / FP / FN |")
    print("| --- | --- | ---: | ---: | ---: |")
    for name in RULES:
        r, p = rates(*totals[name])
        picks = ", ".join(f"{t:+.2f}" for t in sorted(set(chosen[name])))
        print(f"| {name} | {picks} | {r:.4f} | {p:.4f} | {' / '.join(map(str, totals[name]))} |")


if __name__ == "__main__":
    main()
