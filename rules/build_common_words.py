"""Regenerate rules/common_words.txt, ordinary English and clinical words that are not names, and
anonymizer/classifier/data/proper_nouns.txt, the words the English dictionary spells only
Capitalised.

The honorific detector stops extending a name at these words ("dr quiley aware" -> "quiley").
Run once by a developer (``python rules/build_common_words.py``) and commit the output; at run time
only the .txt file is read, so wordfreq and faker are development dependencies only.

Sources and licences:
  * wordfreq (https://github.com/rspeer/wordfreq): code Apache-2.0, word-frequency data
    CC-BY-SA 4.0.  The generated list is derived from that data and carries the same terms.
  * faker (https://github.com/joke2k/faker, MIT): its en_US / en_GB given and family names,
    removed from the list so that "Dr Young" or "dr james smith" keep their names.
  * Debian's hunspell-en-us (SCOWL, BSD-style licence) with hunspell-tools' unmunch
    (``apt-get install hunspell-en-us hunspell-tools``): a
    place of rules/places/ that the dictionary spells only Capitalised ("Chicago", "London",
    "Iowa") is a proper noun, not an everyday word, and is removed, so that "in chicago" is a
    town as "in manila" is; "reading", "mobile" and "turkey" stay (the dictionary has them in
    lower case).  All such proper nouns are written to proper_nouns.txt: after a kinship word a
    surname among them is a name however frequent ("husband evans").
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import wordfreq
from faker.providers.person.en_GB import Provider as GreatBritain
from faker.providers.person.en_US import Provider as UnitedStates

TOP_N = 5000  # the most frequent English words; beyond this most words are rare enough to be names
OUTPUT = Path(__file__).with_name("common_words.txt")
PROPER_OUTPUT = Path(__file__).parents[1] / "anonymizer" / "classifier" / "data" / "proper_nouns.txt"
PLACES = Path(__file__).with_name("places")  # cities.txt, states.txt, countries.txt (rules/build_places.py)
ENGLISH_DIC = Path("/usr/share/hunspell/en_US.dic")
ENGLISH_AFF = Path("/usr/share/hunspell/en_US.aff")
NAME_LISTS = ("first_names_male", "first_names_female", "last_names")

# Words of clinical notes that wordfreq ranks too low to include but that never start or continue
# a name: abbreviations, the verbs that follow a doctor's name, and vocabulary that follows an
# ambiguous honorific ("general anaesthesia", "ms flare").
CLINICAL = """
    abg abx acs adl adls admit admitted ae aki amb anaesthesia anaesthetic anaesthetist assoc asst
    csurg ctsurg gensurg gyn heme hemeonc neurosurg nephro nsurg obgyn onc ophtho pulm rheum uro vascsurg
    anesthesia anesthetic anesthetist aptt ards asap attended attending aware bd bid bka bloods
    bm bp bpm bx ca cabg cap cbc cbg ccf ckd clinic clinician clo cmo cns cons consult consultant
    consulted contacted copd counseled counselled cpr cr crp csf ct cva cvs cxr day days dc ddx
    dept dhf discharge discharged dka dm dnr dob documented dvt dx ecg echo ed egfr ekg emd ent
    escalated esr etoh exam examined explained fbc fhx flare fu fx ga gcs gi gp gu handed hb hdu hpi
    hr htn hx icu idc im informed inr iv ivf ivi la lft lfts liaised lmp los lp mane mc mcv mdt
    med meds mg ml mmhg mo mri na nbm ng ngt nkda nocte notified npo nsaid nstemi nurse nursing
    max mod ob obs od ok ot paeds paged pain pd pe peds pharm physio plt pmh pmhx pneumonia po post pr
    pre prn pt pts pu qds qid ra referred reg registrar rehab relapse resus review reviewed rhs
    rlq rn ro rr ruq rv rx sats sc sob stat stemi surg sx tca tds tid today tomorrow tonight tte
    tx ue updated uri urti us uss uti vbg vs wbc week weeks wnl xr yesterday
"""


def frequent_names() -> set[str]:
    """Given and family names common enough in faker's weighted lists to be worth keeping.

    en_US weights its names by census frequency: a name at or above its list's median weight counts
    as frequent.  en_GB's lists are short and curated, so all of them count.
    """
    names: set[str] = set()
    for provider in (UnitedStates, GreatBritain):
        for attribute in NAME_LISTS:
            entries = getattr(provider, attribute)
            if isinstance(entries, dict) and provider is UnitedStates:
                weights = sorted(entries.values())
                median = weights[len(weights) // 2]
                entries = [name for name, weight in entries.items() if weight >= median]
            names.update(name.casefold() for name in entries)
    return names


def proper_nouns() -> set[str]:
    """The words of one word that the English dictionary spells only Capitalised, lower-cased:
    names, not words ("chicago", "evans"; not "reading", "brown")."""
    # Every form hunspell derives from an entry by its affixes ("independent" gives "independence").
    forms = subprocess.run(["unmunch", str(ENGLISH_DIC), str(ENGLISH_AFF)], capture_output=True, check=True).stdout
    entries = forms.decode("utf-8", "replace").split()
    lower = {e for e in entries if e.islower()}
    return {e.lower() for e in entries if e[:1].isupper() and e.isalpha() and e.lower() not in lower}


def place_proper_nouns(proper: set[str]) -> set[str]:
    """One-word places among the `proper` nouns."""
    places = set()
    for file in ("cities.txt", "states.txt", "countries.txt"):
        for line in (PLACES / file).read_text(encoding="utf-8").splitlines():
            if line and not line.startswith("#"):
                places.add(line.split("\t")[0])
    return proper & places


def build(proper: set[str]) -> list[str]:
    names = frequent_names() | place_proper_nouns(proper)
    words = {w for w in wordfreq.top_n_list("en", TOP_N) if w.isalpha() and w not in names}
    words.update(CLINICAL.split())
    return sorted(words)


def main() -> None:
    proper = proper_nouns()
    PROPER_OUTPUT.write_text(
        "# Words that hunspell-en-us (SCOWL, BSD-style licence) spells only Capitalised, lower-cased.\n"
        "# Generated by rules/build_common_words.py; edit that script, not this file.\n" + "\n".join(sorted(proper)) + "\n",
        encoding="utf-8",
    )
    print(f"wrote {len(proper)} words to {PROPER_OUTPUT}")
    words = build(proper)
    header = (
        "# Common English and clinical words: a name after an honorific stops at these.\n"
        "# Generated by rules/build_common_words.py; edit that script, not this file.\n"
        f"# Derived from wordfreq's {TOP_N} most frequent English words (data CC-BY-SA 4.0,\n"
        "# code Apache-2.0), minus frequent en_US/en_GB given and family names from faker (MIT)\n"
        "# and the places that hunspell-en-us spells only Capitalised, plus clinical abbreviations\n"
        "# and verbs.\n"
    )
    OUTPUT.write_text(header + "\n".join(words) + "\n", encoding="utf-8")
    print(f"wrote {len(words)} words to {OUTPUT}")


if __name__ == "__main__":
    main()
