"""Eponyms: a word the classifier takes for a name that names a disease, sign, test or device.

"Parkinson's disease", "Bell's palsy", "Kernig sign", "Foley catheter", "Glasgow coma scale" and
"Swan-Ganz" read like people or places to a model of local context; removing them costs the text
its meaning and, in surrogate mode, puts a fake name in the released note.  The classifier's veto
(:func:`anonymizer.classifier.model.vetoed`) keeps such a word in the text when

* it is followed by 's (or ') and a disease, palsy, sign or syndrome, whatever the word;
* it is in rules/eponyms.txt and followed by what it names (a sign, test, catheter, scale ...);
* it is in rules/eponyms.txt marked "alone" (an eponym that names its thing by itself, "foley",
  "Parkinson's") and no title is before it ("Dr Foley" stays a name).

Only the classifier's own detections are vetoed: a name the record, an honorific or a list finds
stands.  The list is read once per process; the tests run on the tokens above the threshold only.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import regex

from anonymizer.classifier.features import Tokens
from anonymizer.resources import data_dir, read_word_list

EPONYMS_FILE = "eponyms.txt"
# what an eponym names, after it; the first group also after any word with 's
_STRONG = r"disease|syndrome|palsy|sign|signs|phenomenon|reflex|triad|ulcer|disorder|dementia|lymphoma|sarcoma|tumou?r|anomaly"
_HEADS = (
    _STRONG + r"|test|tests|manoeuvre|maneuver|score|scale|coma|criteria|classification|catheter|cath|tube|drain|line|bag|mask"
    r"|procedure|operation|repair|fundoplication|fracture|node|nodes|position|pupil|stockings?|hernia|cyst|diverticulum|point"
    r"|law|curve|block|type|murmur|lesions?|nodules?|spots?|bodies|area|aphasia|encephalopathy|esophagus|oesophagus|tear"
    r"|tetralogy|thyroiditis|arteritis|sarcoma|suction|shunt|pouch|anastomosis|apnea|breathing|respirations?|contracture"
)
# after the word (and the rest of a hyphenated compound): 's, then at most one word, then the head
POSSESSIVE_HEAD = regex.compile(rf"['’]s?[ \t]+(?:[a-z]+[ \t]+)?(?:{_STRONG})\b", regex.IGNORECASE)
HEAD = regex.compile(rf"(?:['’]s?)?[ \t]+(?:[a-z]+[ \t]+)?(?:{_HEADS})\b", regex.IGNORECASE)
POSSESSIVE = regex.compile(r"['’]s?\b")
COMPOUND = regex.compile(r"(?:[-‐][^\W\d_]+)+")  # the rest of "Swan-Ganz", "Wolff-Parkinson-White"


@dataclass(frozen=True)
class Eponyms:
    """The eponyms (lower case, compounds as written) and those that stand alone."""

    words: frozenset[str]
    alone: frozenset[str]

    @classmethod
    def read(cls, path: Path) -> Eponyms:
        words, alone = set(), set()
        for entry in read_word_list(path):
            word, *flags = entry.lower().split()
            words.add(word)
            if "alone" in flags:
                alone.add(word)
        # a compound's parts are looked up as the compound: "swan" of "swan-ganz"
        return cls(frozenset(words), frozenset(alone))


@lru_cache(maxsize=4)
def load_eponyms(rules_dir: str | None = None) -> Eponyms:
    """The eponyms of `rules_dir` (default: the shipped rules), read once per process."""
    folder = Path(rules_dir) if rules_dir else data_dir("rules")
    path = folder / EPONYMS_FILE
    return Eponyms.read(path) if path.is_file() else Eponyms(frozenset(), frozenset())


def eponymous(text: str, tokens: Tokens, i: int, eponyms: Eponyms, titles: frozenset[str] = frozenset()) -> bool:
    """Whether token i, taken for a name or place, is (part of) an eponym in this text."""
    left = i
    while left > 0 and tokens.gaps[left] in ("-", "‐") and tokens.words[left - 1].isalpha():
        left -= 1  # "Ganz" of "Swan-Ganz": judged as the compound
    start = tokens.starts[left]
    rest = COMPOUND.match(text, tokens.ends[i])
    end = rest.end() if rest else tokens.ends[i]
    word = text[start:end].lower()
    if POSSESSIVE_HEAD.match(text, end):
        return True
    if word not in eponyms.words:
        return False
    if HEAD.match(text, end):
        return True
    if word not in eponyms.alone:
        return False
    return left == 0 or tokens.lowers[left - 1] not in titles
