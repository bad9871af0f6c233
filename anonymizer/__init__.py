"""anonymizer: de-identify clinical notes using each patient's structured record.

The Python API (see README, "Python API"); its names are imported when first used, so
``import anonymizer`` stays cheap::

    from anonymizer import Deidentifier, PatientRecord
    deid = Deidentifier.default(lists={"DOCTOR": ["Zhou"]})
    deid.deidentify("Seen by dr Zhou.").text   # 'Seen by dr [DOCTOR].'
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    # the front door
    "Deidentifier": "anonymizer.api",
    "Deidentified": "anonymizer.api",
    "DeidentificationFailed": "anonymizer.api",
    # the values it takes and returns
    "PatientRecord": "anonymizer.record",
    "Note": "anonymizer.record",
    "NoteResult": "anonymizer.record",
    "Span": "anonymizer.spans",
    "MergedSpan": "anonymizer.spans",
    "CATEGORIES": "anonymizer.spans",
    # its settings
    "Config": "anonymizer.config",
    "ConfigError": "anonymizer.settings",
    "load_config": "anonymizer.config",
    "DetectorsConfig": "anonymizer.settings",
    "ClassifierConfig": "anonymizer.settings",
    "ReplaceConfig": "anonymizer.settings",
    # the detector catalogue
    "DETECTORS": "anonymizer.registry",
    "register_detector": "anonymizer.registry",
    "BuildContext": "anonymizer.registry",
    "DetectorEntry": "anonymizer.registry",
    "DetectorRegistry": "anonymizer.registry",
}

__all__ = ["__version__", *_EXPORTS]

if TYPE_CHECKING:
    from anonymizer.api import DeidentificationFailed, Deidentified, Deidentifier
    from anonymizer.config import Config, load_config
    from anonymizer.record import Note, NoteResult, PatientRecord
    from anonymizer.registry import DETECTORS, BuildContext, DetectorEntry, DetectorRegistry, register_detector
    from anonymizer.settings import ClassifierConfig, ConfigError, DetectorsConfig, ReplaceConfig
    from anonymizer.spans import CATEGORIES, MergedSpan, Span


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'anonymizer' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
