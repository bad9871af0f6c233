"""The ``evaluate`` command: rules, classifier and union scored on a gold corpus, optionally
cross-validated, with the classifier's cost, as one report.

The arithmetic is :mod:`anonymizer.scoring`; cross-validation is
:mod:`anonymizer.classifier.crossval`.  Their names are importable from here too.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from anonymizer.classifier.crossval import cross_validate, held_out
from anonymizer.classifier.features import Tokens
from anonymizer.classifier.training import TrainingOptions, build_dataset
from anonymizer.corpora import Corpus, in_lockbox
from anonymizer.scoring import (
    Predict,
    evaluate,
    format_categories,
    format_curve,
    format_rows,
)


def classifier_cost(corpus: Corpus, detector, rules: Predict | None = None, limit: int | None = None) -> dict:
    """CPU milliseconds per note (process time, so other load on the machine does not count) for
    the classifier's feature extraction and for the whole classifier (features + scoring +
    heuristics), after warm-up of the per-word cache on the same notes, as in a long run."""
    notes = corpus.notes[:limit] if limit else corpus.notes
    prepared = [(n.text, corpus.record(n.patient_id), rules(n.text, corpus.record(n.patient_id)) if rules else []) for n in notes]
    for text, record, spans in prepared:  # warm-up
        detector(text, record, spans)
    t0 = time.process_time()
    for text, record, _ in prepared:
        detector.extractor.slots(text, Tokens.of(text), record)
    t1 = time.process_time()
    for text, record, spans in prepared:
        detector(text, record, spans)
    t2 = time.process_time()
    n = max(len(prepared), 1)
    return {
        "notes": len(prepared),
        "features_ms_per_note": round(1000 * (t1 - t0) / n, 3),
        "classifier_ms_per_note": round(1000 * (t2 - t1) / n, 3),
        "prediction_ms_per_note": round(1000 * max((t2 - t1) - (t1 - t0), 0.0) / n, 3),
    }


def run_evaluation(corpus: Corpus, pipeline=None, cv: int = 0, options=None, timing: bool = True, lockbox: bool = False) -> dict:
    """What ``anonymizer evaluate`` reports: rows, per-category tables, missed phrases, and with
    ``cv`` > 1 the cross-validated rows and threshold curve (the model is retrained per fold with
    `options`, default :class:`~anonymizer.classifier.training.TrainingOptions`).

    With `lockbox`, the corpus is split by patient (:func:`~anonymizer.corpora.in_lockbox`): the
    tuning part is cross-validated (``cv`` folds, default 10) and the lockbox is scored by a model
    trained on the tuning part only; missed phrases come from the tuning part only.

    `pipeline` is an :class:`anonymizer.pipeline.Pipeline` (its rule detectors and classifier)."""
    rules = pipeline.rule_spans if pipeline is not None else None
    excused = pipeline.excused if pipeline is not None else None
    report: dict = {"corpus": corpus.name, "notes": len(corpus.notes), "patients": len({n.patient_id for n in corpus.notes})}
    if lockbox:
        return _lockbox_report(report, corpus, rules, excused, cv or 10, options or TrainingOptions())
    if cv and cv > 1:
        options = options or TrainingOptions()
        dataset = build_dataset([corpus], options.feature_classes, rules, options.confirm)
        result = cross_validate(dataset, options, folds=cv, rules=rules, excused=excused)
        summary = result.summary()
        report.update({"cv": cv, "threshold": summary["threshold"], "rows": summary["rows"],
                       "categories": summary["categories"], "curve": summary["curve"]})
        if rules is not None:
            # the recall heuristics one by one, on the union at the model's threshold
            one_by_one = {"none": {}, **{k: {k: v} for k, v in options.postprocess.items() if v is not None}, "all (as shipped)": None}
            report["heuristics"] = {name: result.counts("union", post=post).row() for name, post in one_by_one.items()}
        report["missed"] = result.counts("union" if rules else "classifier").missed
        return report
    classifier = getattr(pipeline, "classifier", None)
    rows = evaluate(corpus, rules, classifier)
    report["rows"] = {name: c.row() for name, c in rows.items()}
    report["categories"] = {name: c.categories() for name, c in rows.items()}
    last = rows.get("union") or rows.get("classifier") or rows.get("rules")
    report["missed"] = last.missed if last else []
    if timing and classifier is not None:
        report["cost"] = classifier_cost(corpus, classifier, rules, limit=300)
    return report


def _lockbox_report(report: dict, corpus: Corpus, rules: Predict | None, excused, cv: int, options) -> dict:
    """The tuning part cross-validated by patient, beside the lockbox scored by a model trained on
    the tuning part: the same arithmetic on both, so the gap between them is the optimism of the
    tuning figure."""
    from sklearn.model_selection import GroupKFold

    dataset = build_dataset([corpus], options.feature_classes, rules, options.confirm)
    boxed = [in_lockbox(n.note.patient_id) for n in dataset.notes]
    tuning = [i for i, b in enumerate(boxed) if not b]
    box = [i for i, b in enumerate(boxed) if b]
    if len({dataset.notes[i].note.patient_id for i in tuning}) < cv or not box:
        raise ValueError(f"--lockbox needs at least {cv} tuning patients and one lockbox patient")
    groups = [dataset.notes[i].note.patient_id for i in tuning]
    splits = [([tuning[j] for j in a], [tuning[j] for j in b]) for a, b in GroupKFold(cv).split(tuning, groups=groups)]
    parts = {
        "tuning": held_out(dataset, splits, options, rules, excused),
        "lockbox": held_out(dataset, [(tuning, box)], options, rules, excused),
    }
    report.update({"cv": cv, "threshold": options.threshold, "rows": {}, "categories": {}, "split": {}})
    for part, result in parts.items():
        counts = {name: result.counts(name) for name in ("rules", "classifier", "union")}
        for name, c in counts.items():
            report["rows"][f"{part}: {name}"] = c.row()
        report["categories"][f"{part}: union"] = counts["union"].categories()
        report["split"][part] = {"notes": len(result.notes), "patients": len({n.note.patient_id for n in result.notes})}
    t, b = report["rows"]["tuning: union"], report["rows"]["lockbox: union"]
    report["gap"] = {k: round(b[k] - t[k], 4) for k in ("recall", "precision")}
    report["missed"] = parts["tuning"].counts("union").missed  # the lockbox's misses are never shown
    return report


def format_report(report: Mapping, missed: bool = True) -> str:
    """The report as text for the terminal (missed phrases quote the notes: operator's eyes only)."""
    head = f"{report['corpus']}: {report['notes']} notes, {report['patients']} patients"
    if report.get("split"):
        t, b = report["split"]["tuning"], report["split"]["lockbox"]
        head += (f"; tuning part {t['patients']} patients / {t['notes']} notes, {report['cv']}-fold cross-validation grouped by patient;"
                 f" lockbox {b['patients']} patients / {b['notes']} notes, scored by a model trained on the tuning part;"
                 f" threshold {report['threshold']}")
    elif report.get("cv"):
        head += f"; {report['cv']}-fold cross-validation grouped by patient, threshold {report['threshold']}"
    parts = [head, "", format_rows(report["rows"])]
    for name, table in report["categories"].items():
        parts += ["", f"{name}:", format_categories(table)]
    if report.get("gap"):
        parts += ["", "lockbox minus tuning part (union): " + ", ".join(f"{k} {v:+.4f}" for k, v in report["gap"].items())]
    if report.get("heuristics"):
        parts += ["", "union with the recall heuristics one by one:", format_rows(report["heuristics"])]
    if report.get("curve"):
        parts += ["", format_curve(report["curve"])]
    if report.get("cost"):
        parts += ["", "classifier cost: " + ", ".join(f"{k} {v}" for k, v in report["cost"].items())]
    if missed and report.get("missed"):
        parts += ["", f"missed phrases ({len(report['missed'])}):"]
        parts += [f"  {nid}\t{cat}\t{text!r}" for nid, cat, text in report["missed"]]
    return "\n".join(parts)
