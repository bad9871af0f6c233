"""Locate the data that ships beside the code: `rules/` and `migrations/`.

In a clone they sit at the repository root; in an installed wheel they are copied into the
package (see ``[tool.hatch.build.targets.wheel.force-include]`` in pyproject.toml).
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Return the directory `name` ("rules" or "migrations"), wherever the package runs from."""
    for candidate in (_PACKAGE / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"packaged data directory {name!r} not found next to {_PACKAGE}")


def read_word_list(path: Path) -> list[str]:
    """Read a one-entry-per-line list; '#' starts a comment, blank lines are skipped."""
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            entries.append(line)
    return entries
