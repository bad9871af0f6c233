"""Surrogates: consistent, realistic replacements instead of tags ("hidden in plain sight").

Everything is derived from one key per patient, HMAC-SHA256(secret, patient id), where the secret
comes from an environment variable (``ANONYMIZER_SECRET``).  The same secret gives the same
surrogates in every note of a patient and in every later run; another secret gives others, and
without the secret the mapping cannot be recomputed (nor reversed by trying names).

* Names (PATIENT, RELATIVE, DOCTOR, NAME): word by word.  Each distinct name token of the record
  (names and relatives) maps to one fake token of the same origin (Chinese, Malay, Indian,
  Western: looked up in ``rules/surrogates/names.txt``), kind (given or family) and gender where
  the lists know it; a misspelled word maps to the record token it matches by the names detector's
  edit-distance ratio, so "marisete" and "MARISETTE" become one fake, in lower and upper case.
  Case, initials, connectors
  ("bin", "s/o") and punctuation are kept.  Words not in the record (doctors, other people) get a
  fake chosen from the word itself and the patient key: consistent per patient.
* Dates: moved back by a per-patient offset (``date_shift_min``..``date_shift_max`` days), so the
  intervals between a patient's dates are kept, and re-rendered in their own format: delimiters,
  order, zero padding, ordinal suffixes, month names (case and abbreviation), weekdays, two- or
  four-digit years.  Day/month dates take their year from the nearest full date of the note (so
  across a 29 February the same "1/12" may land a day apart in two notes); month/year dates and
  months alone move by the offset in whole months, years alone by it in whole years (or are
  kept: ``years = "keep"``).
* Ages over 89: "90+".  Identifiers, phones: same shape, new digits (an NRIC/FIN gets a valid check
  letter; a phone keeps its country code, grouping and leading digit).  E-mail, URLs: same shape
  on example domains.  Hospitals, places, streets: entries of the shipped lists, per patient.

A surrogate never equals the original, and is checked against the patient's whole record with the
very detectors ``audit leaks`` runs (a candidate they would flag is replaced by the next one; after
a dozen, the span gets its tag: 6 of 17,821 spans of the sample database).  It
is not checked against other patients' records, which the pipeline never sees together: a
surrogate token may happen to be another patient's real name (a common surname is bound to be).
"""

from anonymizer.surrogates.dates import DAYS_PER_MONTH, ParsedDate, parse_date, render_date
from anonymizer.surrogates.lists import SurrogateLists
from anonymizer.surrogates.replacer import SurrogateReplacer, build_replacer, read_secret
from anonymizer.surrogates.shapes import Keyed, nric_check_letter

__all__ = [
    "DAYS_PER_MONTH", "Keyed", "ParsedDate", "SurrogateLists", "SurrogateReplacer",
    "build_replacer", "nric_check_letter", "parse_date", "read_secret", "render_date",
]
