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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import regex
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

from anonymizer.record import PatientRecord
from anonymizer.resources import read_word_list

TOKEN = regex.compile(r"[^\W_]+")
NAME_WORD = regex.compile(r"[^\W\d_]+")
DATA = Path(__file__).resolve().parent / "data"

FEATURE_CLASSES: tuple[str, ...] = (
    "word", "window", "ortho", "affix", "section", "dict", "dictctx", "record", "lists", "cue", "gaz", "rules",
)
RULE_WINDOW = 3

# A heading: a short label followed by a colon, at the start of a line or after ";" or ". ".
CHUNK = regex.compile(r"\S+")
HEADING = regex.compile(r"(?:^|\n|[;.]\s)[ \t*\-•>]*([A-Za-z][A-Za-z/&]*(?:[ ][A-Za-z/&]+){0,2})[ \t]*:(?![\d/])")
WINDOW = 2
CUE_WINDOW = 4


@dataclass(frozen=True)
class Dictionaries:
    """The word lists the features test membership in (see data/ for sources and licences)."""

    words: Mapping[str, frozenset[str]]  # single-word entries per dictionary
    english_rank: Mapping[str, int]
    cues: frozenset[str]
    phrases: Mapping[str, PhraseMatcher] = field(default_factory=dict)  # multi-word entries

    @classmethod
    def load(cls, folder: Path = DATA) -> Dictionaries:
        words: dict[str, frozenset[str]] = {}
        phrases: dict[str, PhraseMatcher] = {}
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
            multi = [e for e in entries if e not in single]
            if multi:
                phrases[name] = PhraseMatcher(multi)
        english = read_word_list(folder / "english.txt")
        rank = {}
        for position, word in enumerate(english):
            rank.setdefault(word, position)
        return cls(words, rank, frozenset(read_word_list(folder / "cue_words.txt")), phrases)


@lru_cache(maxsize=1)
def default_dictionaries() -> Dictionaries:
    return Dictionaries.load()


class PhraseMatcher:
    """Marks the tokens covered by any entry, matched as a whole sequence of lower-cased tokens."""

    def __init__(self, entries: Iterable[str]) -> None:
        index: dict[str, set[tuple[str, ...]]] = {}
        for entry in entries:
            tokens = tuple(t.lower() for t in TOKEN.findall(entry))
            if tokens:
                index.setdefault(tokens[0], set()).add(tokens)
        self._index = {k: sorted(v, key=lambda t: (-len(t), t)) for k, v in index.items()}

    def __bool__(self) -> bool:
        return bool(self._index)

    def cover(self, lowers: Sequence[str]) -> list[bool]:
        covered = [False] * len(lowers)
        n = len(lowers)
        for i, word in enumerate(lowers):
            candidates = self._index.get(word)
            if not candidates:
                continue
            for entry in candidates:
                k = len(entry)
                if i + k <= n and tuple(lowers[i : i + k]) == entry:
                    for j in range(i, i + k):
                        covered[j] = True
                    break
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


def chunk_shape(chunk: str) -> str:
    """Shape of a whitespace-delimited chunk with digit runs kept by length ("7/22" -> "d/dd")."""
    out = []
    for ch in chunk[:24]:
        out.append("X" if ch.isupper() else "x" if ch.isalpha() else "d" if ch.isdigit() else ch)
    collapsed = []
    for c in out:
        if c in "Xx" and collapsed and collapsed[-1] == c:
            continue
        collapsed.append(c)
    return "".join(collapsed)


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
    """A note's tokens: offsets, original strings and lower-cased strings."""

    starts: list[int]
    ends: list[int]
    words: list[str]
    lowers: list[str]

    @classmethod
    def of(cls, text: str) -> Tokens:
        starts, ends, words = [], [], []
        for m in TOKEN.finditer(text):
            starts.append(m.start())
            ends.append(m.end())
            words.append(m.group())
        return cls(starts, ends, words, [w.lower() for w in words])

    def __len__(self) -> int:
        return len(self.words)


def section_headings(text: str, starts: Sequence[int]) -> list[str]:
    positions: list[int] = []
    names: list[str] = []
    for m in HEADING.finditer(text):
        positions.append(m.start(1))
        names.append(" ".join(m.group(1).lower().split()[:2]))
    out = []
    for s in starts:
        k = bisect.bisect_right(positions, s) - 1
        out.append(names[k] if k >= 0 else "none")
    return out


def name_tokens(values: Iterable[str]) -> list[str]:
    return sorted({w.lower() for v in values for w in NAME_WORD.findall(v) if len(w) >= 2})


def ratio_bands(lowers: Sequence[str], names: Sequence[str]) -> dict[str, str]:
    """For each distinct word of at least two letters: its band of min d / min(|n|, |w|)."""
    if not names:
        return {}
    words = sorted({w for w in lowers if len(w) >= 2 and w.isalpha()})
    if not words:
        return {}
    distances = process.cdist(words, names, scorer=Levenshtein.distance, dtype=np.int32)
    wl = np.fromiter((len(w) for w in words), dtype=np.int32, count=len(words))
    nl = np.fromiter((len(n) for n in names), dtype=np.int32, count=len(names))
    ratio = (distances / np.minimum(wl[:, None], nl[None, :])).min(axis=1)
    bands = {}
    for word, r in zip(words, ratio):
        if r == 0:
            bands[word] = "exact"
        elif r < 0.2:
            bands[word] = "lt20"
        elif r < 0.34:
            bands[word] = "lt34"
        elif r < 0.5:
            bands[word] = "lt50"
    return bands


class FeatureExtractor:
    """Turns a note (text + record + configured lists) into one feature list per token."""

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
        self.lists = {c: PhraseMatcher(v) for c, v in sorted((lists or {}).items()) if v}
        self.gazetteers = {c: PhraseMatcher(v) for c, v in sorted((gazetteers or {}).items()) if v}
        self._word_cache: dict[str, tuple[str, ...]] = {}
        self._dict_cache: dict[str, tuple[str, ...]] = {}

    # -- word-only part, cached per word type -------------------------------------------------

    def dict_tags(self, lower: str) -> tuple[str, ...]:
        tags = self._dict_cache.get(lower)
        if tags is None:
            d = self.dictionaries
            tags = tuple(name for name, words in d.words.items() if lower in words)
            tags += ("eng:" + english_band(d.english_rank.get(lower)),)
            if len(self._dict_cache) > 500_000:
                self._dict_cache.clear()
            self._dict_cache[lower] = tags
        return tags

    def word_features(self, word: str) -> tuple[str, ...]:
        feats = self._word_cache.get(word)
        if feats is not None:
            return feats
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
        feats = tuple(out)
        if len(self._word_cache) > 500_000:
            self._word_cache.clear()
        self._word_cache[word] = feats
        return feats

    # -- context part ----------------------------------------------------------------------------

    def context_features(
        self, text: str, tokens: Tokens, record: PatientRecord | None, rule_cats: Sequence[str | None] | None = None
    ) -> list[list[str]]:
        """Features that depend on the token's surroundings, the record, the lists and the rules'
        detections (`rule_cats`: per token, the category a rule detector gave it, else None)."""
        n = len(tokens)
        c = self.classes
        lowers = tokens.lowers
        words = tokens.words
        starts, ends = tokens.starts, tokens.ends
        pad = ["<s>"] * WINDOW
        padded = pad + lowers + ["</s>"] * WINDOW
        out: list[list[str]] = [[] for _ in range(n)]

        caps = [capitalisation(w) for w in words] if "ortho" in c else None
        dict_tags = [self.dict_tags(w) for w in lowers] if "dictctx" in c else None
        headings = section_headings(text, starts) if "section" in c else None
        list_cover = {cat: m.cover(lowers) for cat, m in self.lists.items()} if "lists" in c else {}
        gaz_cover = {cat: m.cover(lowers) for cat, m in self.gazetteers.items()} if "gaz" in c else {}
        dict_phrase_cover = (
            {name: m.cover(lowers) for name, m in self.dictionaries.phrases.items()} if "dict" in c else {}
        )
        bands: dict[str, str] = {}
        rel_bands: dict[str, str] = {}
        if "record" in c and record is not None:
            bands = ratio_bands(lowers, name_tokens(record.names))
            rel_bands = ratio_bands(lowers, name_tokens(record.relatives))
        cues = self.dictionaries.cues
        chunks: list[tuple[str, int]] = []
        if caps is not None:
            spans = [(m.start(), m.end(), m.group()) for m in CHUNK.finditer(text)]
            k = 0
            for s in starts:
                while k < len(spans) and spans[k][1] <= s:
                    k += 1
                if k < len(spans) and spans[k][0] <= s:
                    chunk = spans[k][2]
                    chunks.append((chunk_shape(chunk), s - spans[k][0]))
                else:
                    chunks.append(("", 0))

        for i in range(n):
            f = out[i]
            p = i + WINDOW
            if "window" in c:
                f.append("window:w-1=" + padded[p - 1])
                f.append("window:w+1=" + padded[p + 1])
                f.append("window:w-2=" + padded[p - 2])
                f.append("window:w+2=" + padded[p + 2])
                f.append("window:b-=" + padded[p - 2] + "|" + padded[p - 1])
                f.append("window:b+=" + padded[p + 1] + "|" + padded[p + 2])
            if caps is not None:
                before = text[ends[i - 1] if i else max(0, starts[i] - 3) : starts[i]]
                after = text[ends[i] : starts[i + 1] if i + 1 < n else min(len(text), ends[i] + 3)]
                pb = before.strip()[-2:]
                pa = after.strip()[:2]
                if pb:
                    f.append(("ortho:pb=" if before[-1:] != " " else "ortho:pbs=") + pb)
                if pa:
                    f.append(("ortho:pa=" if after[:1] != " " else "ortho:pas=") + pa)
                if "\n" in before or i == 0:
                    f.append("ortho:linestart")
                cshape, offset = chunks[i]
                if cshape:
                    f.append("ortho:chunk=" + cshape)
                    f.append("ortho:chunkpos=" + ("first" if offset == 0 else "inner"))
                f.append("ortho:cap-1=" + (caps[i - 1] if i else "<s>"))
                f.append("ortho:cap+1=" + (caps[i + 1] if i + 1 < n else "</s>"))
            if headings is not None:
                f.append("section=" + headings[i])
            if dict_tags is not None:
                if i:
                    f += ["dictctx:-1:" + t for t in dict_tags[i - 1]]
                if i + 1 < n:
                    f += ["dictctx:+1:" + t for t in dict_tags[i + 1]]
            for name, cover in dict_phrase_cover.items():
                if cover[i]:
                    f.append("dict:phrase:" + name)
            if bands or rel_bands:
                lw = lowers[i]
                if lw in bands:
                    f.append("record:pt=" + bands[lw])
                if lw in rel_bands:
                    f.append("record:rel=" + rel_bands[lw])
            for cat, cover in list_cover.items():
                if cover[i]:
                    f.append("lists:" + cat)
                if i and cover[i - 1]:
                    f.append("lists:-1:" + cat)
                if i + 1 < n and cover[i + 1]:
                    f.append("lists:+1:" + cat)
            for cat, cover in gaz_cover.items():
                if cover[i]:
                    f.append("gaz:" + cat)
            if rule_cats is not None and "rules" in c:
                if i and rule_cats[i - 1] is not None:
                    f.append("rules:-1:" + rule_cats[i - 1])
                if i + 1 < n and rule_cats[i + 1] is not None:
                    f.append("rules:+1:" + rule_cats[i + 1])
                near = {rule_cats[j] for j in range(max(0, i - RULE_WINDOW), min(n, i + RULE_WINDOW + 1)) if j != i}
                f += ["rules:near:" + cat for cat in sorted(near - {None})]
            if "cue" in c:
                for j in range(max(0, i - CUE_WINDOW), i):
                    if lowers[j] in cues:
                        f.append("cue:-" + lowers[j])
                for j in range(i + 1, min(n, i + 1 + CUE_WINDOW)):
                    if lowers[j] in cues:
                        f.append("cue:+" + lowers[j])
        return out

    def features(
        self, text: str, record: PatientRecord | None = None, tokens: Tokens | None = None,
        rule_cats: Sequence[str | None] | None = None,
    ) -> tuple[Tokens, list[list[str]]]:
        """All features of every token of `text` (word-only ones first)."""
        tokens = tokens or Tokens.of(text)
        context = self.context_features(text, tokens, record, rule_cats)
        return tokens, [list(self.word_features(w)) + ctx for w, ctx in zip(tokens.words, context)]
