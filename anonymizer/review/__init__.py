"""The review loop: reviewers mark what a run missed and what it wrongly removed, the marks become
training notes, and the reviewed sample an estimate of the PHI left in the release.

* :mod:`~anonymizer.review.marks`: the marks and the finished reviews in the target (offsets,
  categories, names and times: never text), and the queue of notes to review;
* :mod:`~anonymizer.review.gold`: a reviewed note's gold (its detections, plus the missed, less the
  wrong spans) and the reviewed notes as a training corpus;
* :mod:`~anonymizer.review.estimate`: recall with its confidence interval, and residual PHI;
* :mod:`~anonymizer.review.app`: the local web page (needs the ``review`` extra), with
  :mod:`~anonymizer.review.charts` for its server-side SVG charts.
"""
