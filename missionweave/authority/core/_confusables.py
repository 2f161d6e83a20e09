"""One identity per look: the Unicode security data of UTS #39 (the checks, and where each id's
scope lies, are in :mod:`._identity`).

* **Mixed script** (UTS #39 §5.1): the resolved script set of the id — the intersection of each
  character's scripts, ``Common`` and ``Inherited`` counting as every script, Han counted in
  Japanese, Korean and Han-with-Bopomofo, Hiragana and Katakana in Japanese, Hangul in Korean,
  Bopomofo in Han-with-Bopomofo — must not be empty: ``аlice`` (a Cyrillic ``а``) is refused,
  ``алиса`` (all Cyrillic) and ``エージェント太郎`` (Japanese) are not.
* **Confusable skeleton** (UTS #39 §4): a new id whose skeleton equals the skeleton of an
  existing one (another spelling) is refused, so ``worker-l`` cannot join beside ``worker-1``.

The data — each character's script, and the confusables of Unicode's ``confusables.txt`` —
comes from the ``confusable-homoglyphs`` package. Its confusables are pairs; the skeleton maps
each character to one prototype of its class (the classes are the pairs' connected parts; the
prototype the smallest code point, or the ASCII sequence a character is confusable with, as
``m`` with ``rn``), after NFD, and lowercases nothing: ``Alice`` and ``alice`` differ.

Where the data gets a look-alike wrong, :data:`SUPPLEMENT` overrides it: each entry maps a
character to the character it is drawn like, and the character takes that one's prototype.
"""

from __future__ import annotations

import json
import unicodedata
from functools import cache
from importlib.resources import files

_AUGMENTED = {
    "HAN": {"HAN", "JPAN", "KORE", "HANB"},
    "HIRAGANA": {"JPAN"},
    "KATAKANA": {"JPAN"},
    "HANGUL": {"KORE"},
    "BOPOMOFO": {"HANB"},
}
_ANY = frozenset({"COMMON", "INHERITED", "UNKNOWN"})


def resolved_scripts(value: str) -> set[str] | None:
    """The resolved script set of ``value`` (UTS #39 §5.1); ``None`` means every script (only
    ``Common``/``Inherited`` characters)."""
    from confusable_homoglyphs import categories

    out: set[str] | None = None
    for ch in value:
        alias = categories.aliases_categories(ch)[0]
        if alias in _ANY:
            continue
        scripts = _AUGMENTED.get(alias, set()) | {alias}
        out = scripts if out is None else out & scripts
    return out


def is_mixed_script(value: str) -> bool:
    """Whether ``value`` mixes scripts no one writing system uses together (UTS #39 §5.1)."""
    scripts = resolved_scripts(value)
    return scripts is not None and not scripts


#: Look-alikes ``confusables.txt`` (as the package ships it) gets wrong, by what most fonts
#: draw: character → the character it looks like. Each was found by attack, with its reason.
SUPPLEMENT: dict[str, str] = {
    # CYRILLIC SMALL LETTER PALOCHKA: the data maps it to ``i``, yet it is drawn as a plain
    # vertical stroke — ``l`` — so ``раураӏ`` passed beside ``paypal`` (issue 38)
    "\u04cf": "l",
}


@cache
def _prototypes() -> dict[str, str]:
    data = json.loads(
        files("confusable_homoglyphs").joinpath("confusables.json").read_text(encoding="utf-8")
    )
    parent: dict[str, str] = {}

    def find(c: str) -> str:
        while parent.get(c, c) != c:
            parent[c] = parent.get(parent[c], parent[c])
            c = parent[c]
        return c

    sequences: dict[str, str] = {}
    for ch, homoglyphs in data.items():
        for h in homoglyphs:
            other = h["c"].strip("\u200e\u200f")
            if len(ch) != 1:
                continue
            if len(other) == 1:
                a, b = find(ch), find(other)
                if a != b:
                    parent[max(a, b)] = min(a, b)
            elif other and other.isascii() and other.isprintable():
                sequences[ch] = other
    out = {c: find(c) for c in list(parent)}
    out.update(sequences)
    out.update({ch: out.get(like, like) for ch, like in SUPPLEMENT.items()})
    return out


def skeleton(value: str) -> str:
    """The confusable skeleton of ``value`` (UTS #39 §4): two ids that look alike have the
    same skeleton."""
    table = _prototypes()
    mapped = "".join(table.get(ch, ch) for ch in unicodedata.normalize("NFD", value))
    return unicodedata.normalize("NFD", mapped)


__all__ = ["SUPPLEMENT", "is_mixed_script", "resolved_scripts", "skeleton"]
