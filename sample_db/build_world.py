#!/usr/bin/env python3
"""Write sample_db/data/world.txt: names and places from outside Singapore, drawn from Faker.

The generator reads the written file, so building the sample needs neither Faker nor its version:
the same seed gives the same bytes wherever it runs.  Run this only to refresh the lists
(`pip install faker`); Faker's own seed is fixed, so a given Faker version writes the same file.

    python sample_db/build_world.py
"""

from __future__ import annotations

from pathlib import Path

from faker import Faker
from faker.providers.address.en_US import Provider as UsAddress

OUT = Path(__file__).resolve().parent / "data" / "world.txt"
HEADER = """\
# Names and places from outside Singapore, written by sample_db/build_world.py from Faker
# (MIT; en_US given names and surnames, countries, US states; real towns of the de_DE, it_IT and
# id_ID providers).  Invented combinations; no real person intended.
"""


def unique(make, n: int, keep=lambda s: True) -> list[str]:
    """The first `n` distinct values of `make()` that pass `keep`, in the order drawn."""
    seen: dict[str, None] = {}
    for _ in range(n * 50):
        value = make()
        if keep(value):
            seen.setdefault(value, None)
        if len(seen) == n:
            break
    return list(seen)


def main() -> None:
    us = Faker("en_US")
    us.seed_instance(20261125)
    plain = str.isalpha
    sections = {
        "given_female": unique(us.first_name_female, 60, plain),
        "given_male": unique(us.first_name_male, 60, plain),
        "surnames": unique(us.last_name, 60, plain),
        "countries": unique(us.country, 40, lambda c: c.replace(" ", "").isalpha() and len(c) <= 14),
        # states_abbr also lists DC, which states does not: pair them without it
        "us_states": [f"{name}|{code}" for name, code in zip(UsAddress.states, [c for c in UsAddress.states_abbr if c != "DC"])],
    }
    towns = []
    for locale in ("de_DE", "it_IT", "id_ID"):
        faker = Faker(locale)
        faker.seed_instance(20261125)
        towns += unique(faker.city, 12, lambda c: c.replace(" ", "").replace("-", "").isalpha() and 4 <= len(c) <= 16)
    sections["towns"] = towns
    text = HEADER + "".join(f"\n[{name}]\n" + "\n".join(values) + "\n" for name, values in sections.items())
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}: " + ", ".join(f"{k} {len(v)}" for k, v in sections.items()))


if __name__ == "__main__":
    main()
