"""Feature extraction on fragmented clinical text: bullets, ALL CAPS, abbreviations, odd spacing."""

from __future__ import annotations

import base64
import random
import re
import tracemalloc

import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st

from anonymizer.classifier.features import (
    _LABEL,
    CHUNK_SHAPE,
    FEATURE_CLASSES,
    FeatureExtractor,
    PhraseMatcher,
    Tokens,
    capitalisation,
    chunk_keys,
    chunk_shape,
    number_band,
    ratio_bands,
    section_headings,
    shape,
)
from anonymizer.record import PatientRecord

TEXT = (
    "NEURO: A&OX3, MAE.\n"
    "- SOCIAL: wife Mary at bedside; son called.\n"
    "* s/p CABG 7/22/93, seen by Dr. E. Nessenson NP\n"
    "PT TRANSFERRED FROM CALVERT HOSPITAL ON 7/23.\n"
)


def feats_of(extractor: FeatureExtractor, text: str, word: str, record=None, nth: int = 0) -> list[str]:
    tokens, feats = extractor.features(text, record)
    positions = [i for i, w in enumerate(tokens.words) if w == word]
    return feats[positions[nth]]


def test_tokens_are_runs_of_letters_and_digits():
    tokens = Tokens.of("s/p CABG 7/22/93, A&OX3 o'quimby_x")
    assert tokens.words == ["s", "p", "CABG", "7", "22", "93", "A", "OX3", "o", "quimby", "x"]
    assert all(tokens.words[i] == "s/p CABG 7/22/93, A&OX3 o'quimby_x"[s:e] for i, (s, e) in enumerate(zip(tokens.starts, tokens.ends)))


def test_word_shapes_and_capitalisation():
    assert shape("Nessenson") == "Xx"
    assert shape("OX3") == "Xd"
    assert capitalisation("CALVERT") == "upper"
    assert capitalisation("Mary") == "title"
    assert capitalisation("E") == "initial"
    assert capitalisation("93") == "digits"
    assert capitalisation("OX3") == "alnum"
    assert chunk_shape("7/22/93,") == "d/dd/dd,"
    assert number_band("1993") == "year4"
    assert number_band("7") == "month"
    assert number_band("22") == "day"


def test_section_headings_at_line_starts_bullets_and_after_semicolons():
    text = "NEURO: ok\n- SOCIAL: wife here; PLAN: home\nno heading here 12:30"
    tokens = Tokens.of(text)
    heads = dict(zip(tokens.words, section_headings(text, tokens.starts)))
    assert heads["ok"] == "neuro"
    assert heads["wife"] == "social"
    assert heads["home"] == "plan"
    assert heads["30"] == "plan"  # a time is no heading


def test_no_mark_repeats():
    """The scorer adds every mark's weights (np.bincount): a feature is binary, so a repeated cue
    word, adjacent list entries or a run of rule-flagged tokens must still mark each token once."""
    extractor = FeatureExtractor(lists={"DOCTOR": ["Nessenson", "E Nessenson"], "HOSPITAL": ["Calvert Hospital"]})
    text = "wife at bedside, wife and son at bedside from Calvert Hospital; Dr E Nessenson Nessenson 7/22/93 7/23"
    tokens = Tokens.of(text)
    rule_cats = ["DATE" if w.isdigit() else None for w in tokens.words]
    marks = extractor.slots(text, tokens, PatientRecord("p", names=("Mary Wife",)), rule_cats)["extra"]
    pairs = [(i, feature) for feature, at in marks for i in at]
    assert len(pairs) == len(set(pairs)) > 0
    assert "cue:-wife" in {feature for feature, _ in marks} and all(0 <= i < len(tokens) for i, _ in pairs)


def test_context_window_cues_and_lists_on_fragmented_text():
    extractor = FeatureExtractor(lists={"HOSPITAL": ["Calvert Hospital"], "DOCTOR": ["Nessenson"]})
    f = feats_of(extractor, TEXT, "Mary")
    assert "word=mary" in f
    assert "window:w-1=wife" in f and "window:w+1=at" in f
    assert "window:b-=social|wife" in f
    assert "section=social" in f
    assert "cue:-wife" in f
    assert "dict:first" in f
    assert "ortho:cap=title" in f

    f = feats_of(extractor, TEXT, "CALVERT")
    assert "lists:HOSPITAL" in f
    assert "ortho:cap=upper" in f
    assert "cue:-from" in f

    f = feats_of(extractor, TEXT, "E")
    assert "ortho:cap=initial" in f
    assert "ortho:pa=." in f
    assert "lists:+1:DOCTOR" in f

    f = feats_of(extractor, TEXT, "22")
    assert "ortho:chunk=d/dd/dd," in f
    assert "ortho:pb=/" in f
    assert "ortho:num=day" in f


def test_patient_name_edit_distance_ratio():
    record = PatientRecord("1", names=("MARISETTE", "VRABEL"))
    extractor = FeatureExtractor()
    text = "pt marisette seen; vrabl family in. vrabel aware"
    assert "record:pt=exact" in feats_of(extractor, text, "marisette", record)
    assert "record:pt=lt34" in feats_of(extractor, text, "vrabl", record)  # d=1, 1/5 = 0.2
    bands = ratio_bands(["vrabel", "in", "aware"], ["vrabel", "marisette"])
    assert bands == {"vrabel": "exact"}


def test_feature_classes_can_be_switched_off_and_features_are_deterministic():
    every = FeatureExtractor()
    only_word = FeatureExtractor(classes=("word", "window"))
    f = feats_of(only_word, TEXT, "Mary")
    assert all(x.startswith(("word=", "window:")) for x in f)
    a = every.features(TEXT)[1]
    b = FeatureExtractor().features(TEXT)[1]
    assert a == b
    assert set(FEATURE_CLASSES) >= {"word", "window", "ortho", "dict", "record", "lists", "cue", "gaz"}


def test_usage_tells_a_common_word_as_written_from_a_name():
    """A word that is both common English and a name gets its case with it: the linear model can
    weigh "rose" in a sentence apart from "Rose" the daughter."""
    extractor = FeatureExtractor()
    usage = [f for f in feats_of(extractor, "BP rose to 160. Daughter Rose visited.", "rose") if f.startswith("usage:")]
    assert len(usage) == 1 and usage[0].startswith("usage:ambig:") and usage[0].endswith("=lower")
    usage = [f for f in feats_of(extractor, "BP rose to 160. Daughter Rose visited.", "Rose") if f.startswith("usage:")]
    assert len(usage) == 1 and usage[0].endswith("=title")
    visiting = [f for f in feats_of(extractor, "SON AND DAUGHTER VISITING", "VISITING") if f.startswith("usage:")]
    assert visiting and visiting[0].startswith("usage:common:") and visiting[0].endswith("=upper")
    assert not [f for f in feats_of(extractor, "Seen by Dr Nessenson", "Nessenson") if f.startswith("usage:")]
    assert not [f for f in feats_of(FeatureExtractor(classes=("word", "dict")), "BP rose to 160", "rose") if f.startswith("usage:")]


def test_phrase_matcher_matches_whole_token_sequences_case_insensitively():
    m = PhraseMatcher({"HOSPITAL": ["Anne Arundel Medical Center"], "LOCATION": ["Bel Air", "Arundel"]})
    tokens = Tokens.of("to ANNE ARUNDEL MEDICAL CENTER; anne only; bel air")
    assert m.cover(tokens.lowers) == {"HOSPITAL": {1, 2, 3, 4}, "LOCATION": {2, 7, 8}}
    assert m.cover(["anne", "arundel", "medical"]) == {"LOCATION": {1}}  # an entry is matched whole


def test_empty_and_symbol_only_text():
    extractor = FeatureExtractor()
    assert extractor.features("")[1] == []
    assert extractor.features(" -- ** \n ")[1] == []


@given(st.text(alphabet="ab AB:;.\n\t*-/1", max_size=60))
def test_headings_found_as_by_one_pattern_anchored_at_the_start_too(text):
    """section_headings tries the note's start apart from the other anchors (for speed); the
    headings must be those of the single pattern whose anchor may also be "^"."""
    one = re.compile(r"(?:^|\n|[;.]\s)" + _LABEL)
    starts = Tokens.of(text).starts
    names = ["none"] + [" ".join(m.group(1).lower().split()[:2]) for m in one.finditer(text)]
    positions = [m.start(1) for m in one.finditer(text)]
    expected = [names[sum(p <= s for p in positions)] for s in starts]
    assert section_headings(text, starts) == expected


@given(st.text(alphabet=st.sampled_from("aZ9 \t\n\x1c./-(:Éé٣_"), max_size=80) | st.text(max_size=40))
def test_token_splits_and_chunk_keys_agree_with_matching_each_token_and_chunk(text):
    """Tokens.of splits the note and chunk_keys translates whole notes (both for speed); they must
    give what matching each token and each whitespace-delimited chunk gives."""
    tokens = Tokens.of(text)
    matches = list(regex.finditer(r"[^\W_]+", text))
    expected = ([m.start() for m in matches], [m.end() for m in matches], [m.group() for m in matches])
    assert (tokens.starts, tokens.ends, tokens.words) == expected
    assert tokens.gaps == [text[a:b] for a, b in zip([0, *tokens.ends], [*tokens.starts, len(text)])]
    chunks = list(regex.finditer(r"\S+", text))
    assert list(map(chunk_shape, chunk_keys(text, tokens))) == [
        chunk_shape(next(c.group() for c in chunks if c.start() <= s < c.end())) for s in tokens.starts
    ]


@pytest.mark.parametrize(
    "text",
    [
        ("é " + "1/" * 10_000)[:20_000],  # a non-ASCII note with a long run without spaces
        ("seen ° " + base64.b64encode(random.Random(0).randbytes(15_000)).decode())[:20_000],  # a base64 blob after "°"
        ("seen " + "1/" * 10_000)[:20_000],  # the same in an ASCII note
    ],
)
def test_chunk_keys_take_memory_linear_in_the_note_however_long_its_chunks(text):
    """Every token of a chunk shares one key of at most CHUNK_SHAPE characters (a copy of the
    chunk per token took 200 MB here, 24 GiB on a 1 MB note)."""
    tokens = Tokens.of(text)
    tracemalloc.start()
    try:
        keys = chunk_keys(text, tokens)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 * len(text) + 2**20
    assert max(map(len, keys)) <= CHUNK_SHAPE
