"""The ``train`` command: fit a model on annotated corpora, write it, and return its card
(optionally with cross-validated figures).

Fitting is :mod:`anonymizer.classifier.training`, cross-validation
:mod:`anonymizer.classifier.crossval`; this module is above both and nothing below imports it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from anonymizer.classifier.crossval import cross_validate
from anonymizer.classifier.training import FORMAT, TrainingOptions, build_dataset, fit, rule_pipeline, save_model, training_notes
from anonymizer.corpora import Corpus, merge_lists


def train(
    corpora: Sequence[Corpus],
    out: Path,
    options: TrainingOptions | None = None,
    cv: int = 0,
    pipeline=None,
    command: str = "",
) -> dict:
    """Train on all notes of `corpora`, write the model to `out` and return its model card.

    With ``cv`` > 1, the card also holds cross-validated figures (folds grouped by patient) for the
    classifier alone and, when `pipeline` (an :class:`anonymizer.pipeline.Pipeline` of rule
    detectors) is given, for the rules alone and the union.
    """
    options = options or TrainingOptions()
    if pipeline is None and "rules" in options.feature_classes:
        # the "rules" features need the rule detectors: the default configuration's, with the lists
        pipeline = rule_pipeline(merge_lists(*(c.lists for c in corpora)))
    rules = pipeline.rule_spans if pipeline is not None else None
    dataset = build_dataset(corpora, options.feature_classes, rules if "rules" in options.feature_classes else None, options.confirm)
    card: dict = {  # no wall-clock time in it: the same inputs must give the same bytes
        "format": FORMAT,
        "corpora": [
            {"name": c.name, "notes": len(c.notes), "patients": len({n.patient_id for n in c.notes}),
             "phrases": sum(len(n.spans) for n in c.notes), "lists": {k: len(v) for k, v in sorted(c.lists.items())}}
            for c in corpora
        ],
        "tokens": sum(len(n.tokens) for n in dataset.notes),
        "phi_tokens": sum(sum(1 for label in n.labels if label != "O") for n in dataset.notes),
        "options": options.as_dict(),
        "command": command,
    }
    if cv and cv > 1:
        card["cv"] = cross_validate(dataset, options, folds=cv, rules=rules, excused=pipeline.excused if pipeline else None).summary()
    if options.augment:
        card["augmented_tokens"] = sum(len(c.tokens) for copies in dataset.augmented(options.augment) for c in copies)
    model = fit(training_notes(dataset, range(len(dataset.notes)), options), options, dataset.lists)
    model["card"] = card
    data = save_model(model, out)
    card["sha256"] = hashlib.sha256(data).hexdigest()
    card["bytes"] = len(data)
    card["features"] = {name: len(head["weights"]) for name, head in model["heads"].items()}
    return card
