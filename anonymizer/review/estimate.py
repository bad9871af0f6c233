"""The release estimate: from a random sample of reviewed notes, the recall of the run over the whole
release with a 95 % confidence interval, and the PHI tokens expected to remain per 1,000 notes.

Recall is counted in tokens (:mod:`anonymizer.scoring`'s unit): the PHI tokens of the sample that
no detection covers, over all its PHI tokens.  The tokens of one note are not independent draws (a
patient's name missed once is missed in every line that repeats it), so treating them as such
gives an interval that is too narrow.  The sample is a cluster sample of notes, and the interval is
Korn and Graubard's (1998) for it: Clopper–Pearson (exact binomial) on the *effective* number of
tokens, the token count divided by the design effect, which is measured from how the misses spread
over the notes (the ratio estimator's linearised variance; never below 1, and taken as 1 when the
sample has no miss, where the variance cannot be measured), with their degrees-of-freedom
correction for the number of notes.  A note-level cluster bootstrap was considered and left aside:
with no miss in the sample (the case a good run is in) every resample has recall 1 and the interval
collapses to a point.  ``benchmarks/review_loop.py coverage`` checks how often the interval covers
the recall of the whole sample database.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

LEVEL = 0.95


@dataclass(frozen=True)
class Estimate:
    notes: int
    phi_tokens: int
    missed_tokens: int
    recall: float
    interval: tuple[float, float]  # Korn–Graubard, 95 %
    design_effect: float
    naive_interval: tuple[float, float]  # Wilson, tokens taken as independent (too narrow; shown for comparison)
    residual_per_1000_notes: float
    residual_interval: tuple[float, float]
    method: str = "Korn–Graubard: Clopper–Pearson on the effective sample size of a cluster sample of notes"

    def as_dict(self) -> dict:
        return asdict(self)


def clopper_pearson(successes: float, trials: float, level: float = LEVEL) -> tuple[float, float]:
    """The exact binomial interval (for a non-integer effective count too)."""
    alpha = 1 - level
    low = 0.0 if successes <= 0 else float(stats.beta.ppf(alpha / 2, successes, trials - successes + 1))
    high = 1.0 if successes >= trials else float(stats.beta.ppf(1 - alpha / 2, successes + 1, trials - successes))
    return low, high


def wilson(successes: float, trials: float, level: float = LEVEL) -> tuple[float, float]:
    z = float(stats.norm.ppf(1 - (1 - level) / 2))
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * np.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return max(0.0, float(centre - half)), min(1.0, float(centre + half))


def estimate(counts: Sequence[tuple[int, int]], level: float = LEVEL) -> Estimate:
    """The estimate from each reviewed note's (PHI tokens, missed tokens); ValueError without PHI."""
    gold = np.array([g for g, _ in counts], dtype=float)
    found = gold - np.array([m for _, m in counts], dtype=float)
    notes, total = len(counts), float(gold.sum())
    if total == 0:
        raise ValueError("the reviewed notes hold no PHI token: no recall to estimate")
    p = float(found.sum()) / total
    deff = 1.0
    if notes > 1 and 0 < p < 1:
        variance = notes / (notes - 1) * float(((found - p * gold) ** 2).sum()) / total**2
        deff = max(1.0, variance / (p * (1 - p) / total))
    effective = total / deff
    if notes > 1:  # degrees of freedom: the number of notes, not of tokens
        z = stats.norm.ppf(1 - (1 - level) / 2)
        effective *= float((z / stats.t.ppf(1 - (1 - level) / 2, notes - 1)) ** 2)
    low, high = clopper_pearson(p * effective, effective, level)
    per_note = total / notes
    return Estimate(
        notes=notes,
        phi_tokens=int(total),
        missed_tokens=int(total - found.sum()),
        recall=p,
        interval=(low, high),
        design_effect=deff,
        naive_interval=wilson(p * total, total, level),
        residual_per_1000_notes=1000 * (1 - p) * per_note,
        residual_interval=(1000 * (1 - high) * per_note, 1000 * (1 - low) * per_note),
    )


def format_estimate(e: Estimate) -> str:
    low, high = e.interval
    rlow, rhigh = e.residual_interval
    return "\n".join([
        f"reviewed sample: {e.notes:,} notes, {e.phi_tokens:,} PHI tokens, {e.missed_tokens:,} of them missed by the run",
        f"recall: {e.recall:.4f}, 95% confidence interval {low:.4f} to {high:.4f}",
        f"  ({e.method}; design effect {e.design_effect:.2f};",
        f"   tokens taken as independent, Wilson, would say {e.naive_interval[0]:.4f} to {e.naive_interval[1]:.4f}: too narrow)",
        f"PHI tokens left per 1,000 notes: {e.residual_per_1000_notes:,.1f} (95%: {rlow:,.1f} to {rhigh:,.1f};"
        " the sample's PHI tokens per note taken as known)",
    ])


def release_estimate(config, target) -> tuple[Estimate, object]:
    """The estimate from the target's reviews of randomly sampled notes as released now; also the
    :class:`~anonymizer.review.gold.Reviews` it was made from.  ValueError when there is none."""
    from anonymizer.review.gold import note_counts, reviewed_notes

    reviews = reviewed_notes(config, target, release=True)
    sample = [n for n in reviews.notes if n.sampled]
    if not sample:
        raise ValueError("no reviewed note of a random sample (anonymizer review --sample N --seed S): nothing to estimate from")
    return estimate(note_counts(sample)), reviews
