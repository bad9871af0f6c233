"""Per-token features for the local-context classifier (seed 000 sec. 5, seed 004 sec. 4).

A token is a run of letters and digits (``[^\\W_]+``), the unit evaluation scores.  Each token gets
a set of binary features (strings); a feature's name starts with its class, so a class can be
switched off for ablation:

========== =====================================================================================
word       the token lower-cased
window     the words at -2..+2 and the bigrams before and after (lower-cased)
ortho      capitalisation, word shape, length, digits, the punctuation touching the token ("-",
           "/", "." ...), line start; the capitalisation of the neighbours
affix      prefixes and suffixes of 2 and 3 characters
section    the heading of the section the token sits under ("social:", "neuro:" ...)
dict       the token's membership in the dictionaries: first names, last names, places,
           hospital words, months, common English (by frequency band), clinical words
dictctx    the same for the words at -1 and +1
usage      how the token is written when it is a common English word: its frequency band with its
           capitalisation, and whether a name dictionary holds it too ("may", "will", "rose",
           "frank": lower case they are a verb or an adjective, capitalised they may be a name); a
           conjunction the linear model cannot form from dict and ortho (docs/ablation.md)
record     the smallest edit-distance ratio d / min(|n|, |w|) to the patient's name tokens (and
           to the relatives' names), in bands (seed 003)
lists      membership (whole-phrase match) in the configured lists, for the token and neighbours
cue        cue words (son, wife, dr, md, from, lives ...) within four tokens either side
gaz        membership in gazetteers learned from the training annotations (shipped with a model)
rules      the categories the rule detectors gave the neighbouring tokens (-1, +1, within 3)
========== =====================================================================================

Word-only features depend on the token's string alone and are cached per word type.
"""

from __future__ import annotations

import bisect
import re
import string
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import accumulate, islice, repeat
from pathlib import Path

import numpy as np
import regex
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

from anonymizer.record import PatientRecord
from anonymizer.resources import read_word_list
from anonymizer.spans import TOKEN

# A note split at its tokens (``[^\W_]+``, captured): gap, token, gap, ..., token, gap.  In an
# ASCII note, where the token class is exactly [A-Za-z0-9], the standard library's engine splits
# about twice as fast as `regex`.
SPLIT, ASCII_SPLIT = regex.compile(r"([^\W_]+)"), re.compile(r"([A-Za-z0-9]+)")
NAME_WORD = regex.compile(r"[^\W\d_]+")
DATA = Path(__file__).resolve().parent / "data"

FEATURE_CLASSES: tuple[str, ...] = (
    "word", "window", "ortho", "affix", "section", "dict", "dictctx", "usage", "record", "lists", "cue", "gaz", "rules",
)
RULE_WINDOW = 3
CACHE_LIMIT = 200_000  # entries per cache; a cache that fills is emptied, so memory stays flat

CHUNK = regex.compile(r"\S+")
# In an ASCII note without \x1c-\x1f (which str.split() and str.isspace() take for spaces, unlike
# CHUNK), the chunks are str.split()'s.
SPLIT_SPACES = "\x1c\x1d\x1e\x1f"
SPACE = regex.compile(r"\s")
# A heading: a short label followed by a colon, at the start of the note or of a line, or after
# ";" or ". ".  The note's start is tried apart: a pattern that may match at "^" is tried at every
# position, one whose every branch starts with a literal only where one of those characters is
# (twice as fast; "[;.]\s" would make it try everywhere).  (And the standard library's engine runs
# these twice as fast as the regex module's.)
_LABEL = r"[ \t*\-•>]*([A-Za-z][A-Za-z/&]*(?:[ ][A-Za-z/&]+){0,2})[ \t]*:(?![\d/])"
HEADING_AT_START, HEADING = re.compile(_LABEL), re.compile(r"(?:\n|;\s|\.\s)" + _LABEL)
WINDOW = 2
CUE_WINDOW = 4


@dataclass(frozen=True)
class Dictionaries:
    """The word lists the features test membership in (see data/ for sources and licences)."""

    words: Mapping[str, frozenset[str]]  # single-word entries per dictionary
    english_rank: Mapping[str, int]
    cues: frozenset[str]
    phrases: Mapping[str, Sequence[str]] = field(default_factory=dict)  # multi-word entries, by dictionary

    @classmethod
    def load(cls, folder: Path = DATA) -> Dictionaries:
        words: dict[str, frozenset[str]] = {}
        phrases: dict[str, list[str]] = {}
        for name, file in (
            ("first", "first_names.txt"),
            ("last", "last_names.txt"),
            ("place", "places.txt"),
            ("hosp", "hospital_words.txt"),
            ("month", "months.txt"),
            ("med", "medical.txt"),
        ):
            entries = read_word_list(folder / file)
            single = {e for e in entries if len(TOKEN.findall(e)) == 1 and TOKEN.fullmatch(e)}
            words[name] = frozenset(single)
            phrases[name] = [e for e in entries if e not in single]
        english = read_word_list(folder / "english.txt")
        rank = {}
        for position, word in enumerate(english):
            rank.setdefault(word, position)
        return cls(words, rank, frozenset(read_word_list(folder / "cue_words.txt")), phrases)


@lru_cache(maxsize=1)
def default_dictionaries() -> Dictionaries:
    return Dictionaries.load()


class PhraseMatcher:
    """Finds entries as whole sequences of lower-cased tokens, each entry under a tag (a list's
    category, a dictionary's name), in one pass over a note for all tags.  Entries of several
    tokens are indexed by their first two, so a common first word ("new", "north") costs little."""

    def __init__(self, entries: Mapping[str, Iterable[str]]) -> None:
        single: dict[str, set[str]] = {}
        multi: dict[tuple[str, str], set[tuple[tuple[str, ...], str]]] = {}
        for tag, values in entries.items():
            for entry in values:
                tokens = tuple(t.lower() for t in TOKEN.findall(entry))
                if len(tokens) == 1:
                    single.setdefault(tokens[0], set()).add(tag)
                elif tokens:
                    multi.setdefault(tokens[:2], set()).add((tokens, tag))
        self._single = {k: sorted(v) for k, v in single.items()}
        self._multi = {k: sorted(v) for k, v in multi.items()}
        self._single_words, self._first_words = frozenset(self._single), frozenset(first for first, _ in self._multi)

    def __bool__(self) -> bool:
        return bool(self._single or self._multi)

    def cover(self, lowers: Sequence[str], words: set[str] | None = None) -> dict[str, set[int]]:
        """Per tag, the positions of the tokens some occurrence of an entry covers (`words`: the
        set of `lowers`, if the caller has it)."""
        covered: dict[str, set[int]] = {}
        words = set(lowers) if words is None else words
        hits = words & self._single_words  # most notes hold few entries
        if hits:
            for i in [i for i, word in enumerate(lowers) if word in hits]:
                for tag in self._single[lowers[i]]:
                    covered.setdefault(tag, set()).add(i)
        firsts = words & self._first_words
        if firsts:
            n = len(lowers)
            for i in [i for i, word in enumerate(lowers[:-1]) if word in firsts]:
                for entry, tag in self._multi.get((lowers[i], lowers[i + 1]), ()):
                    k = len(entry)
                    if i + k <= n and tuple(lowers[i : i + k]) == entry:
                        covered.setdefault(tag, set()).update(range(i, i + k))
        return covered


def shape(word: str) -> str:
    out = []
    for ch in word:
        c = "X" if ch.isupper() else "x" if ch.isalpha() else "d" if ch.isdigit() else ch
        if not out or out[-1] != c:
            out.append(c)
    return "".join(out)


def capitalisation(word: str) -> str:
    if word.isdigit():
        return "digits"
    if any(ch.isdigit() for ch in word):
        return "alnum"
    if len(word) == 1:
        return "initial" if word.isupper() else "letter"
    if word.isupper():
        return "upper"
    if word[0].isupper() and word[1:].islower():
        return "title"
    if word.islower():
        return "lower"
    return "mixed"


CHUNK_SHAPE = 24  # the characters of a chunk its shape reads


def chunk_shape(chunk: str) -> str:
    """Shape of a whitespace-delimited chunk with digit runs kept by length ("7/22" -> "d/dd")."""
    out = []
    for ch in chunk[:CHUNK_SHAPE]:
        out.append("X" if ch.isupper() else "x" if ch.isalpha() else "d" if ch.isdigit() else ch)
    collapsed = []
    for c in out:
        if c in "Xx" and collapsed and collapsed[-1] == c:
            continue
        collapsed.append(c)
    return "".join(collapsed)


# An ASCII chunk's key (chunk_keys): its letters and digits by class, which keeps its shape.
SHAPE_KEYS = bytes.maketrans((string.ascii_uppercase + string.ascii_lowercase + string.digits).encode(), b"X" * 26 + b"x" * 26 + b"0" * 10)


def number_band(word: str) -> str:
    value = int(word[:6])
    if len(word) == 4 and 1900 <= value <= 2099:
        return "year4"
    if len(word) > 3:
        return "long"
    if value == 0:
        return "zero"
    if value <= 12:
        return "month"
    if value <= 31:
        return "day"
    if len(word) == 2:
        return "yy"
    return "other"


def english_band(rank: int | None) -> str:
    if rank is None:
        return "none"
    if rank < 1000:
        return "1k"
    if rank < 5000:
        return "5k"
    return "30k"


@dataclass
class Tokens:
    """A note's tokens: offsets, original strings and lower-cased strings, and the text between
    them (``gaps[i]`` before token i, ``gaps[-1]`` after the last one: one more than the tokens)."""

    starts: list[int]
    ends: list[int]
    words: list[str]
    lowers: list[str]
    gaps: list[str]

    @classmethod
    def of(cls, text: str) -> Tokens:
        pieces = (ASCII_SPLIT if text.isascii() else SPLIT).split(text)  # no match objects: half the time of finditer
        offsets = list(accumulate(map(len, pieces)))  # where each piece ends
        words = pieces[1::2]
        # lower-cased at once: a token holds no NUL (it is letters and digits), so the join splits back
        lowers = "\0".join(words).lower().split("\0") if words else []
        return cls(offsets[0:-1:2], offsets[1::2], words, lowers, pieces[0::2])

    def __len__(self) -> int:
        return len(self.words)


_space_runs: dict[str, int] = {}  # per gap between tokens, its runs of spaces (gaps repeat: " ", ", " ...)


def space_runs(gap: str) -> int:
    """The runs of spaces in `gap`: the chunks that start in it, the token after it included."""
    runs = _space_runs.get(gap)
    if runs is None:
        pieces = len(gap.split())
        runs = (pieces - 1 + gap[0].isspace() + gap[-1].isspace() if pieces else 1) if gap else 0
        if len(_space_runs) > CACHE_LIMIT:
            _space_runs.clear()
        _space_runs[gap] = runs
    return runs


def chunk_keys(text: str, tokens: Tokens) -> list[str]:
    """Per token, its whitespace-delimited chunk, as the key of the chunk's shape (chunk_shape
    gives the same shape for the key as for the chunk): its first CHUNK_SHAPE characters, one
    string per chunk shared by the chunk's tokens, so that the keys of a long run without spaces
    ("1/1/1/...", a base64 blob) take memory linear in the note, and the scorer's cache of keys
    holds no long string.

    A note has about as many distinct chunks as tokens; in an ASCII note the key is the chunk with
    its letters and digits translated ("Dr.Ng," -> "Xx.Xx,"), of which there are far fewer, so the
    scorer's cache of keys stays small and rarely misses.  There a token's chunk is counted from
    the runs of spaces in the gaps before it, and the whole note is translated at once."""
    if not text.isascii() or any(c in text for c in SPLIT_SPACES):
        chunks = [m.span() for m in CHUNK.finditer(text)]
        keys = [text[start : min(end, start + CHUNK_SHAPE)] for start, end in chunks]
        k = np.searchsorted(np.fromiter((start for start, _ in chunks), dtype=np.int64, count=len(chunks)), tokens.starts, side="right") - 1
        return list(map(keys.__getitem__, k.tolist()))
    # a note that starts with a chunk starts it before any run of spaces
    first = 0 if text[:1].isspace() else 1
    # the gaps repeat (" ", ", ", ...): a dictionary lookup each, space_runs only for a new one
    runs = list(map(_space_runs.get, tokens.gaps[:-1]))
    if None in runs:
        runs = list(map(space_runs, tokens.gaps[:-1]))
    index = accumulate(runs, initial=first - 1)
    keys = [key[:CHUNK_SHAPE] for key in text.encode("ascii").translate(SHAPE_KEYS).decode("ascii").split()]
    return list(map(keys.__getitem__, islice(index, 1, None)))


def section_headings(text: str, starts: Sequence[int]) -> list[str]:
    """The heading each token (starting at `starts`, ascending) sits under, "none" before the
    first: the tokens under one heading are counted by bisection, a note having few headings."""
    out: list[str] = []
    name = "none"
    first = HEADING_AT_START.match(text)
    for m in [first, *HEADING.finditer(text, first.end())] if first else HEADING.finditer(text):
        out += repeat(name, bisect.bisect_left(starts, m.start(1)) - len(out))  # the tokens before this heading
        name = " ".join(m.group(1).lower().split()[:2])
    out += repeat(name, len(starts) - len(out))
    return out


def name_tokens(values: Iterable[str]) -> list[str]:
    return sorted({w.lower() for v in values for w in NAME_WORD.findall(v) if len(w) >= 2})


def ratio_bands(lowers: Iterable[str], names: Sequence[str]) -> dict[str, str]:
    """For each distinct word of letters within ratio 0.5 of a name: its band of min d /
    min(|n|, |w|) (seed 003's measure).  A one-letter word is never within it (a name has two
    letters or more, so d >= 1 = |w|)."""
    if not names:
        return {}
    words = list(filter(str.isalpha, set(lowers)))  # distinct
    if not words:
        return {}
    distances = process.cdist(words, names, scorer=Levenshtein.distance, dtype=np.int32)
    wl = np.fromiter(map(len, words), dtype=np.int32, count=len(words))
    nl = np.fromiter(map(len, names), dtype=np.int32, count=len(names))
    ratio = (distances / np.minimum(wl[:, None], nl[None, :])).min(axis=1)
    close = np.flatnonzero(ratio < 0.5)
    return {words[k]: ratio_band(r) for k, r in zip(close.tolist(), ratio[close].tolist())}  # Python floats compare faster


def rule_features(category: str) -> tuple[str, str, str]:
    """The features a rule's category gives its token, the next one and the previous one."""
    return "rules:self:" + category, "rules:-1:" + category, "rules:+1:" + category


def ratio_band(ratio: float) -> str:
    return "exact" if ratio == 0 else "lt20" if ratio < 0.2 else "lt34" if ratio < 0.34 else "lt50"


GROUPS: dict[str, dict[str, int]] = {
    "word": {"w-2": 0, "w-1": 1, "word": 2, "w+1": 3, "w+2": 4},
    "pair": {"b-": 0, "b+": 3},
    "gap": {"before": 0, "after": 1},
    "chunk": {"chunk": 0},
    "section": {"section": 0},
}
"""How a token's features are put together.  :meth:`FeatureExtractor.slots` gives, per group, a
list of keys; token i's key for a slot is its group's key at position i + offset, and its features
are the union over slots of what that key gives (:meth:`FeatureExtractor.slot_features`):

* ``word``: the note's words with two None (the note's edge) on each side; the token itself
  (``word``), its neighbours (``w-1``, ``w+1``) and the words two away (``w-2``, ``w+2``);
* ``pair``: the bigrams of the lower-cased words padded with "<s>"/"</s>" (:func:`bigrams` of the
  ``word`` keys, which slots() does not repeat); the bigram before the token (``b-``) and after it
  (``b+``);
* ``gap``: the text between consecutive tokens, and before the first and after the last; the gap
  before the token and after it (punctuation touching it, line start, chunk start);
* ``chunk``: the whitespace-delimited chunk holding the token (as :func:`chunk_keys` keys it);
  ``section``: the heading the token sits under;

Keys repeat across tokens and notes, so the run-time scorer caches, per group and key, the summed
weights of each slot's features (anonymizer/classifier/model.py), and training expands the same
keys into feature names: one definition for both.

Besides the groups, ``slots()["extra"]`` holds the features of the rarer kinds (phrases, record
bands, lists, gazetteers, the rules' neighbouring categories, cue words) as :data:`Marks`: about
half of a note's tokens get one, in combinations too varied to be worth a key of their own, so
the scorer adds each mark's weights directly."""
Marks = list[tuple[str, Collection[int]]]  # (feature name, the positions of the tokens that have it)
SLOTS: tuple[str, ...] = tuple(slot for slots in GROUPS.values() for slot in slots)
EDGES = ("<s>", "</s>")  # a bigram's word beyond the note's start, and beyond its end


def bigrams(words: Sequence[str | None]) -> list[tuple[str, str]]:
    """The ``pair`` group's keys, from the ``word`` group's (the words, two None on each side)."""
    padded = [EDGES[0]] * WINDOW + [w.lower() for w in words[WINDOW:-WINDOW]] + [EDGES[1]] * WINDOW
    return list(zip(padded, padded[1:]))


class FeatureExtractor:
    """Turns a note (text + record + configured lists) into slot keys, and keys into features."""

    def __init__(
        self,
        lists: Mapping[str, Sequence[str]] | None = None,
        gazetteers: Mapping[str, Sequence[str]] | None = None,
        classes: Iterable[str] = FEATURE_CLASSES,
        dictionaries: Dictionaries | None = None,
    ) -> None:
        self.classes = frozenset(classes)
        unknown = self.classes - set(FEATURE_CLASSES)
        if unknown:
            raise ValueError(f"unknown feature class {min(unknown)!r}")
        self.dictionaries = dictionaries or default_dictionaries()
        # the dictionaries' phrases, the configured lists and the gazetteers, found in one pass,
        # each under the feature it gives
        phrases: dict[str, Sequence[str]] = {}
        for cls_, prefix, entries in (("dict", "dict:phrase:", self.dictionaries.phrases), ("lists", "lists:", lists or {}),
                                      ("gaz", "gaz:", gazetteers or {})):
            if cls_ in self.classes:
                phrases.update({prefix + tag: v for tag, v in sorted(entries.items()) if v})
        self.phrases = PhraseMatcher(phrases)
        self._bands: dict[tuple[str, ...], tuple[set[str], dict[str, str]]] = {}  # per record's names: words seen, bands
        self._slot_cache: dict[str, dict] = {slot: {} for slot in SLOTS}
        self._dict_cache: dict[str, tuple[str, ...]] = {}
        self._cue_features = {w: ("cue:-" + w, "cue:+" + w) for w in self.dictionaries.cues}  # made once, not per note

    def usage(self, word: str) -> str | None:
        """A common English word's use as written ("ambig:1k=lower" for "may" in a sentence,
        "common:5k=upper" for "VISITING"): its band among the 5,000 most frequent English words,
        whether a name dictionary also holds it, and its capitalisation; None for other words."""
        lower = word.lower()
        rank = self.dictionaries.english_rank.get(lower)
        if rank is None or rank >= 5000 or len(word) < 2 or not word.isalpha():
            return None
        words = self.dictionaries.words
        kind = "ambig" if lower in words["first"] or lower in words["last"] else "common"
        return f"{kind}:{english_band(rank)}={capitalisation(word)}"

    def dict_tags(self, lower: str) -> tuple[str, ...]:
        tags = self._dict_cache.get(lower)
        if tags is None:
            d = self.dictionaries
            tags = tuple(name for name, words in d.words.items() if lower in words)
            tags += ("eng:" + english_band(d.english_rank.get(lower)),)
            if len(self._dict_cache) > CACHE_LIMIT:
                self._dict_cache.clear()
            self._dict_cache[lower] = tags
        return tags

    # -- keys: what each token's features depend on -------------------------------------------

    def slots(
        self, text: str, tokens: Tokens, record: PatientRecord | None = None, rule_cats: Sequence[str | None] | None = None
    ) -> dict[str, Sequence]:
        """Per group, its keys (see GROUPS), and under "extra" the note's :data:`Marks`
        (`rule_cats`: per token, the category a rule detector gave it, else None)."""
        n = len(tokens)
        c = self.classes
        words, starts = tokens.words, tokens.starts
        out: dict[str, Sequence] = {"word": [None, None, *words, None, None]}
        if not n:
            return {}
        if "ortho" in c:
            # the note's first token starts a line; the gap before it is the up to 3 characters there
            gaps = tokens.gaps
            out["gap"] = ["\n" + gaps[0][-3:], *islice(gaps, 1, n), gaps[n][:3]]
            out["chunk"] = chunk_keys(text, tokens)
        if "section" in c:
            out["section"] = section_headings(text, starts)
        out["extra"] = self._extra(tokens, record, rule_cats)
        return out

    def _extra(self, tokens: Tokens, record: PatientRecord | None, rule_cats: Sequence[str | None] | None) -> Marks:
        """The features of the rarer kinds, which only some tokens get, as marks: each feature
        with the positions of the tokens that have it.  No position repeats within a mark: a
        feature is binary."""
        n = len(tokens)
        c = self.classes
        lowers = tokens.lowers
        words = set(lowers)
        marks: Marks = []
        for feature, covered in sorted(self.phrases.cover(lowers, words).items()):
            marks.append((feature, covered))
            if feature.startswith("lists:"):  # a list entry marks its neighbours too
                marks.append(("lists:-1:" + feature[6:], [i + 1 for i in covered if i + 1 < n]))
                marks.append(("lists:+1:" + feature[6:], [i - 1 for i in covered if i > 0]))
        if "record" in c and record is not None:
            for kind, values in (("pt", record.names), ("rel", record.relatives)):
                bands = self._record_bands(words, values)
                by_band: dict[str, list[int]] = {}
                for i in [i for i, w in enumerate(lowers) if w in bands] if bands else ():
                    by_band.setdefault(bands[lowers[i]], []).append(i)
                marks += [(f"record:{kind}=" + band, at) for band, at in by_band.items()]
        if "rules" in c and rule_cats is not None:
            by_category: dict[str, list[int]] = {}
            for j in [j for j, cat in enumerate(rule_cats) if cat is not None]:
                by_category.setdefault(rule_cats[j], []).append(j)  # type: ignore[index]
            for cat, at in sorted(by_category.items()):
                here, after, before = rule_features(cat)  # the token itself, the one after it, the one before it
                marks += [(here, at), (after, [j + 1 for j in at if j + 1 < n]), (before, [j - 1 for j in at if j > 0])]
                # tokens with a token of this category within RULE_WINDOW, itself not counted
                near = {i for j in at for i in range(j - RULE_WINDOW, j + RULE_WINDOW + 1) if i != j}
                marks.append(("rules:near:" + cat, [i for i in near if 0 <= i < n]))
        if "cue" in c and not words.isdisjoint(self.dictionaries.cues):
            cues = self._cue_features
            last: dict[str, int] = {}  # per cue word, its previous position: windows must not overlap
            for j in [j for j, w in enumerate(lowers) if w in cues]:
                after, before = cues[lowers[j]]
                previous = last.get(lowers[j], -n)
                last[lowers[j]] = j
                marks.append((after, range(max(j + 1, previous + 1 + CUE_WINDOW), min(n, j + 1 + CUE_WINDOW))))
                marks.append((before, range(max(0, j - CUE_WINDOW, previous), j)))
        return marks

    def prime(self, record: PatientRecord | None, lowers: Iterable[str]) -> None:
        """Work out the record bands of several notes' words at once (the notes of one patient):
        an edit-distance pass costs a fixed 20 µs or so, paid then once, not once per note."""
        if "record" in self.classes and record is not None:
            words = set(lowers)
            for names in (record.names, record.relatives):
                self._record_bands(words, names)

    def _record_bands(self, words: set[str], names: Sequence[str]) -> dict[str, str]:
        """:func:`ratio_bands` of the note's words and of the words of the record's notes seen
        before (a patient's notes repeat their words; the run gives a patient's notes in a row)."""
        if not names:
            return {}
        key = tuple(names)
        known = self._bands.get(key)
        if known is None:
            if len(self._bands) > 16:  # the run moves on patient by patient: old ones are done
                self._bands.clear()
            known = self._bands[key] = (set(), {})
        seen, bands = known
        new = words - seen
        if new:
            bands.update(ratio_bands(new, name_tokens(names)))
            seen |= new
        return bands

    # -- features: what each key gives -------------------------------------------------------

    def slot_features(self, slot: str, key: object) -> tuple[str, ...]:
        """The feature names `key` gives in `slot` (cached: keys repeat across tokens and notes)."""
        cache = self._slot_cache[slot]
        feats = cache.get(key)
        if feats is None:
            feats = self._expand(slot, key)
            if len(cache) > CACHE_LIMIT:
                cache.clear()
            cache[key] = feats
        return feats

    def _expand(self, slot: str, key) -> tuple[str, ...]:
        c = self.classes
        out: list[str] = []
        if slot == "word":
            return self._word(key) if key is not None else ()
        edge = "<s>" if slot[:2] == "w-" else "</s>"
        if slot in ("w-1", "w+1"):
            offset = slot[1:]
            if "window" in c:
                out.append(f"window:w{offset}=" + (key.lower() if key is not None else edge))
            if "ortho" in c:
                out.append(f"ortho:cap{offset}=" + (capitalisation(key) if key is not None else edge))
            if "dictctx" in c and key is not None:
                out += [f"dictctx:{offset}:" + t for t in self.dict_tags(key.lower())]
        elif slot in ("w-2", "w+2") and "window" in c:
            out.append(f"window:{slot}=" + (key.lower() if key is not None else edge))
        elif slot in ("b-", "b+"):
            out.append(f"window:{slot}=" + "|".join(key))
        elif slot == "before":
            pb = key.strip()[-2:]
            if pb:
                out.append(("ortho:pb=" if key[-1:] != " " else "ortho:pbs=") + pb)
            if "\n" in key:
                out.append("ortho:linestart")
            # the token starts its whitespace-delimited chunk (the note's first gap ends in "\n")
            out.append("ortho:chunkpos=" + ("first" if SPACE.fullmatch(key[-1:]) else "inner"))
        elif slot == "after":
            pa = key.strip()[:2]
            if pa:
                out.append(("ortho:pa=" if key[:1] != " " else "ortho:pas=") + pa)
        elif slot == "chunk":
            out.append("ortho:chunk=" + chunk_shape(key))
        elif slot == "section":
            out.append("section=" + key)
        return tuple(out)

    def _word(self, word: str) -> tuple[str, ...]:
        """Features of the token's string alone."""
        lower = word.lower()
        out: list[str] = []
        c = self.classes
        if "word" in c:
            out.append("word=" + lower)
        if "ortho" in c:
            out.append("ortho:cap=" + capitalisation(word))
            out.append("ortho:shape=" + shape(word))
            out.append("ortho:len=" + str(min(len(word), 12)))
            if any(ch.isdigit() for ch in word):
                out.append("ortho:hasdigit")
                if word.isdigit():
                    out.append(f"ortho:digits={min(len(word), 8)}")
                    out.append("ortho:num=" + number_band(word))
        if "affix" in c and len(lower) > 2:
            out += ["affix:p2=" + lower[:2], "affix:p3=" + lower[:3], "affix:s2=" + lower[-2:], "affix:s3=" + lower[-3:]]
        if "dict" in c:
            out += ["dict:" + t for t in self.dict_tags(lower)]
        if "usage" in c and (use := self.usage(word)) is not None:
            out.append("usage:" + use)
        return tuple(out)

    def features(
        self, text: str, record: PatientRecord | None = None, tokens: Tokens | None = None,
        rule_cats: Sequence[str | None] | None = None,
    ) -> tuple[Tokens, list[list[str]]]:
        """All feature names of every token of `text` (for training and inspection)."""
        tokens = tokens or Tokens.of(text)
        out: list[list[str]] = [[] for _ in range(len(tokens))]
        slots = self.slots(text, tokens, record, rule_cats)
        marks = slots.pop("extra", [])
        if "window" in self.classes and slots:
            slots["pair"] = bigrams(slots["word"])
        for group, keys in slots.items():
            for slot, offset in GROUPS[group].items():
                for feats, key in zip(out, keys[offset:]):
                    feats += self.slot_features(slot, key)
        for feature, at in marks:
            for i in at:
                out[i].append(feature)
        return tokens, out
