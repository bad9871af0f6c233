import datetime as dt
import pickle

from anonymizer.record import Note, NoteResult, PatientRecord
from anonymizer.spans import MergedSpan


def test_values_crossing_processes_pickle_to_equal_values_through_their_constructor():
    span = MergedSpan(3, 9, "PATIENT", ("record:name", "svm"))
    values = [
        PatientRecord("p1", names=("Ann Lee",), dates=(dt.date(1950, 2, 3),), phones=("555 0100",)),
        Note("n1", "p1", "Ann seen"),
        span,
        NoteResult("n1", "p1", "[PATIENT] seen", (span,), "digest"),
        NoteResult("n2", "p1", None, (), "digest", "NoteTimeout: too slow"),
    ]
    for value in values:
        blob = pickle.dumps(value)
        assert pickle.loads(blob) == value
        assert b"__setstate__" not in blob and type(value).__reduce__(value)[0] is type(value)
