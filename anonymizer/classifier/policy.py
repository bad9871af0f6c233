"""What the run lets the classifier decide, from rules/classifier.toml: which rules' spans it must
confirm (``confirm``) and which recall heuristics run after it (``[heuristics]``).

This is run-time policy, kept with the rules it names and checked against them when the pipeline
is built (an unknown rule, key or value is a one-line :class:`~anonymizer.config.ConfigError`);
the model file holds weights and vocabulary only.
"""

from __future__ import annotations

import tomllib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from anonymizer.detectors.honorifics import entries
from anonymizer.resources import data_dir
from anonymizer.settings import ConfigError

POLICY_FILE = "classifier.toml"
# heuristic -> what its value may be; propagate: the score above which a name spreads (false: off)
HEURISTICS = {"extend_names": bool, "relative_cues": bool, "extend_places": bool, "propagate": float}


@dataclass(frozen=True)
class Policy:
    confirm: frozenset[str] = frozenset()  # sources ("regex:date_dm_numeric") the classifier must confirm
    # the heuristics' switches as SvmDetector and cross-validation read them (propagate: None = off)
    heuristics: Mapping[str, object] = field(default_factory=dict)


def read_policy(rules_dir: Path, rules: Mapping[str, Collection[str]]) -> Policy:
    """The policy of `rules_dir`, its confirmed rules checked against `rules` (detector -> rule names)."""
    path = Path(rules_dir) / POLICY_FILE
    where = f"rules/{POLICY_FILE}"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{where}: not found in {rules_dir} (the classifier's confirmed rules and heuristics)") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: not valid TOML ({exc})") from None
    unknown = set(data) - {"confirm", "heuristics"}
    if unknown:
        raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r} (confirm, [heuristics])")
    confirm = data.get("confirm", [])
    if not isinstance(confirm, list) or not all(isinstance(name, str) for name in confirm):
        raise ConfigError(f"{where}: confirm: expected a list of rule names")
    for name in confirm:
        detector, _, rule = name.partition(":")
        if detector not in rules:
            raise ConfigError(f"{where}: confirm: {name!r} is not a rule name (one of {', '.join(f'{d}:<rule>' for d in sorted(rules))})")
        if rule not in rules[detector]:
            raise ConfigError(f"{where}: confirm: unknown rule {name!r} (no {detector} rule {rule!r} in the rules)")
    table = data.get("heuristics", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: heuristics: expected a table")
    heuristics: dict[str, object] = {}
    for key, value in table.items():
        kind = HEURISTICS.get(key)
        if kind is None:
            raise ConfigError(f"{where}: heuristics: unknown heuristic {key!r} (one of {', '.join(HEURISTICS)})")
        if kind is bool and isinstance(value, bool):
            heuristics[key] = value
        elif kind is float and value is False:
            heuristics[key] = None
        elif kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            heuristics[key] = float(value)
        else:
            expected = "true or false" if kind is bool else "a number, or false (off)"
            raise ConfigError(f"{where}: heuristics.{key}: expected {expected}, got {value!r}")
    return Policy(frozenset(confirm), heuristics)


def rule_names(rules_dir: Path, patterns: Collection[str] | None = None) -> dict[str, frozenset[str]]:
    """The rules a policy may name, by detector: the patterns (`patterns`: their names when the
    caller has compiled them already) and the honorifics of `rules_dir`."""
    if patterns is None:
        from anonymizer.detectors.patterns import PatternDetector

        patterns = [rule.name for rule in PatternDetector.from_rules(Path(rules_dir)).rules]
    honorifics = entries(tomllib.loads((Path(rules_dir) / "honorifics.toml").read_text(encoding="utf-8")))
    return {"regex": frozenset(patterns), "honorific": frozenset(h["name"] for h in honorifics)}


@lru_cache(maxsize=4)
def _load(rules_dir: str, mtime: float) -> Policy:  # mtime: a rewritten file is read again
    return read_policy(Path(rules_dir), rule_names(Path(rules_dir)))


def load_policy(rules_dir: Path | None = None) -> Policy:
    """The checked policy of `rules_dir` (default: the shipped rules), read once per process."""
    rules = Path(rules_dir) if rules_dir is not None else data_dir("rules")
    path = rules / POLICY_FILE
    return _load(str(rules.resolve()), path.stat().st_mtime if path.is_file() else 0.0)
