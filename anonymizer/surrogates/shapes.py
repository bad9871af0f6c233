"""Shapes of surrogates: keyed draws, case, NRIC check letters, scrambled codes, example domains."""

from __future__ import annotations

import hashlib
import hmac
from typing import Callable, Sequence

import regex

SECOND_LEVEL = frozenset({"com", "co", "org", "net", "edu", "gov", "ac", "gob", "or", "ne"})
_NRIC_WEIGHTS = (2, 7, 6, 5, 4, 3, 2)
_NRIC_LETTERS = {"S": (0, "JZIHGFEDCBA"), "T": (4, "JZIHGFEDCBA"), "F": (0, "XWUTRQPNMLK"), "G": (4, "XWUTRQPNMLK")}
NRIC = regex.compile(r"[STFGM]\d{7}[A-Z]")


def nric_check_letter(prefix: str, digits: str) -> str:
    """The check letter of a Singapore NRIC/FIN (S, T, F, G and M series) for its seven digits."""
    weighted = sum(w * int(d) for w, d in zip(_NRIC_WEIGHTS, digits))
    prefix = prefix.upper()
    if prefix == "M":
        return "KLJNPQRTUWX"[10 - (3 + weighted) % 11]
    offset, letters = _NRIC_LETTERS[prefix]
    return letters[(offset + weighted) % 11]


# --- Keyed draws --------------------------------------------------------------------------------


class Keyed:
    """Deterministic draws from a key: the same parts always give the same number."""

    def __init__(self, key: bytes) -> None:
        self.key = key

    def bytes(self, *parts: object) -> bytes:
        return hmac.new(self.key, "\x1f".join(map(str, parts)).encode("utf-8"), hashlib.sha256).digest()

    def number(self, *parts: object) -> int:
        return int.from_bytes(self.bytes(*parts)[:8], "big")

    def digits(self, count: int, *parts: object) -> str:
        out = ""
        block = 0
        while len(out) < count:
            out += "".join(str(b % 10) for b in self.bytes(*parts, "digits", block) if b < 250)
            block += 1
        return out[:count]

    def letters(self, count: int, *parts: object, alphabet: str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ") -> str:
        data = self.bytes(*parts, "letters")
        while len(data) < count:
            data += self.bytes(*parts, "letters", len(data))
        return "".join(alphabet[b % len(alphabet)] for b in data[:count])

    def pick(self, options: Sequence[str], accept: Callable[[str], bool], *parts: object) -> str | None:
        """The first acceptable option in a keyed probe order (a stride coprime with the length)."""
        n = len(options)
        if not n:
            return None
        start = self.number(*parts, "start") % n
        stride = _coprime_stride(n, self.number(*parts, "stride"))
        for i in range(n):
            option = options[(start + i * stride) % n]
            if accept(option):
                return option
        return None


def _coprime_stride(n: int, draw: int) -> int:
    if n == 1:
        return 1
    stride = 1 + draw % (n - 1)
    while _gcd(stride, n) != 1:
        stride = stride % (n - 1) + 1
    return stride


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


# --- Case and shape -----------------------------------------------------------------------------


def like(surrogate: str, original: str) -> str:
    """`surrogate` in the case of `original`: "TAN" -> "LIM", "tan" -> "lim", "Tan" -> "Lim"."""
    letters = [c for c in original if c.isalpha()]
    if not letters:
        return surrogate
    if all(c.isupper() for c in letters) and (len(letters) > 1 or len(surrogate) == 1):
        return surrogate.upper()
    if all(c.islower() for c in letters):
        return surrogate.lower()
    if len(letters) == 1:  # a capital initial: the surrogate's first letter stands for the name
        return surrogate[:1].upper() + surrogate[1:]
    return surrogate


def like_phrase(surrogate: str, original: str) -> str:
    letters = [c for c in original if c.isalpha()]
    if letters and all(c.isupper() for c in letters):
        return surrogate.upper()
    if letters and all(c.islower() for c in letters):
        return surrogate.lower()
    return surrogate


def scramble(token: str, keyed: Keyed, parts: tuple) -> str:
    """Letters and digits replaced by keyed ones of the same kind and case; the rest kept."""
    letters = keyed.letters(len(token), *parts, alphabet="abcdefghijklmnopqrstuvwxyz")
    digits = keyed.digits(len(token), *parts)
    return "".join(
        (letters[i].upper() if c.isupper() else letters[i]) if c.isalpha() else digits[i] if c.isdigit() else c
        for i, c in enumerate(token)
    )


def example_domain(host: str) -> str:
    """"mail.hospital.com.sg" -> "example.com.sg": the reserved example domain, same ending."""
    labels = host.split(".")
    if len(labels) >= 3 and labels[-2].casefold() in SECOND_LEVEL and len(labels[-1]) == 2:
        ending = labels[-2:]
    else:
        ending = labels[-1:] if len(labels) > 1 else ["com"]
    domain = ".".join(["example", *ending])
    if domain.casefold() == host.casefold():  # already an example domain: still change it
        domain = "example.net" if ending != ["net"] else "example.org"
    return domain
