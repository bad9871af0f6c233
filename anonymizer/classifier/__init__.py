"""The local-context classifier: an SVM over per-token features, run after the rules.

* :mod:`.features` - tokens and their features;
* :mod:`.train` - building a model from annotated corpora (scikit-learn ``LinearSVC``);
* :mod:`.model` - the model as plain data at run time and the ``svm`` detector;
* :mod:`.postprocess` - the recall heuristics applied after the classifier.

Importing this package loads neither scikit-learn nor a model.
"""

from __future__ import annotations

__all__ = ["load_detector", "train"]


def load_detector(config, lists):
    from anonymizer.classifier.model import load_detector as _load

    return _load(config, lists)


def train(*args, **kwargs):
    from anonymizer.classifier.train import train as _train

    return _train(*args, **kwargs)
