"""The local-context classifier: an SVM over per-token features, run after the rules.

* :mod:`.features` - tokens and their features;
* :mod:`.model` - the model as plain data at run time and the ``svm`` detector;
* :mod:`.postprocess` - the recall heuristics applied after the classifier;
* :mod:`.policy` - what the run lets the classifier decide (rules/classifier.toml);
* :mod:`.training` - fitting a model on annotated corpora (scikit-learn ``LinearSVC``);
* :mod:`.crossval` - cross-validation grouped by patient (on :mod:`anonymizer.scoring`);
* :mod:`.train` - the ``train`` command: fit, write the model and its card.

Importing this package imports none of them (no scikit-learn, no model).
"""
