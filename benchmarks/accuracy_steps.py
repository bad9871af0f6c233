"""What each change moved: the tuning part's cross-validation and the lockbox, commit by commit.

    python benchmarks/accuracy_steps.py REV [REV ...] [--corpus DIR] [--json OUT]

Checks each revision out into a temporary git worktree and runs, with that revision's code and
rules, ``anonymizer evaluate CORPUS --lockbox`` (10-fold cross-validation grouped by patient on the
tuning part, and the lockbox scored by a model trained on the tuning part). Prints one markdown
row per revision: union recall and precision on both, and the change from the row before.
The lockbox's missed phrases are never printed: only its totals.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpora" / "physionet-nursing"


def evaluate(rev: str, corpus: Path) -> dict:
    """The `--lockbox` report of `rev`, run from a worktree of it."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(tree), rev], check=True)
        try:
            out = Path(tmp) / "report.json"
            env = {**os.environ, "PYTHONPATH": str(tree)}
            subprocess.run(
                [sys.executable, "-m", "anonymizer", "evaluate", str(corpus), "--lockbox", "--json", str(out)],
                check=True, env=env, cwd=tree, stdout=subprocess.DEVNULL,
            )
            return json.loads(out.read_text())
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=True)


def row(rev: str, report: dict, before: dict | None) -> str:
    cells = [f"`{rev}`"]
    for part in ("tuning", "lockbox"):
        union = report["rows"][f"{part}: union"]
        cell = f"{union['recall']:.4f} / {union['precision']:.4f}"
        if before is not None:
            prior = before["rows"][f"{part}: union"]
            cell += f" ({union['recall'] - prior['recall']:+.4f} / {union['precision'] - prior['precision']:+.4f})"
        cells.append(cell)
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revs", nargs="+", help="git revisions, oldest first")
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--json", type=Path, help="also write every report here")
    args = parser.parse_args()
    print("| revision | tuning part, 10-fold CV: union R / P (change) | lockbox: union R / P (change) |")
    print("|---|---|---|")
    reports: dict[str, dict] = {}
    before = None
    for rev in args.revs:
        report = evaluate(rev, args.corpus)
        reports[rev] = report
        print(row(rev, report, before), flush=True)
        before = report
    if args.json:
        args.json.write_text(json.dumps(reports, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
