"""Capabilities ``name@version`` and the one rule for which serves which (MW-10.3-d/f).

A capability offered (an Agent Card's, a handler's) **satisfies** one required (a contract's)
when the names are equal, the major versions are equal and the offered version is at least the
required one, compared as versions (``packaging.version``: ``1.10`` > ``1.9``, ``1.2`` ==
``1.2.0``). Ranking (``select_candidates``), admission and the handler registry all ask here,
so they never disagree (card ``x@1.2.0`` does not serve ``x@1.2.5`` anywhere).
"""

from __future__ import annotations

from collections.abc import Iterable

from packaging.version import InvalidVersion, Version


def parse_capability(capability: str) -> tuple[str, Version]:
    """``"dist.verify@1.2"`` → ``("dist.verify", Version("1.2"))``.

    Raises:
        ValueError: no ``@``, an empty name, or a version ``packaging`` cannot read.
    """
    name, at, version = capability.rpartition("@")
    if not at or not name:
        raise ValueError(f"capability {capability!r} is not name@version")
    try:
        return name, Version(version)
    except InvalidVersion:
        raise ValueError(f"capability {capability!r}: {version!r} is not a version") from None


def satisfies(offered: str, required: str) -> bool:
    """Whether capability ``offered`` serves ``required`` (same name, same major version,
    offered ≥ required). A malformed capability serves only its exact spelling."""
    try:
        oname, over = parse_capability(offered)
        rname, rver = parse_capability(required)
    except ValueError:
        return offered == required
    return oname == rname and over.major == rver.major and over >= rver


def best_match(offered: Iterable[str], required: str) -> str | None:
    """The highest-versioned of ``offered`` that serves ``required``, or ``None``."""
    hits = [o for o in offered if satisfies(o, required)]
    if not hits:
        return None
    return max(hits, key=_version_key)


def capability_matches(offered: Iterable[str], required: Iterable[str]) -> list[str] | None:
    """For each required capability, the offered one that serves it (:func:`best_match`), in
    order; ``None`` when one of them is served by none (the agent is not eligible)."""
    pool = list(offered)
    out: list[str] = []
    for req in required:
        hit = best_match(pool, req)
        if hit is None:
            return None
        out.append(hit)
    return out


def _version_key(capability: str) -> Version:
    try:
        return parse_capability(capability)[1]
    except ValueError:
        return Version("0")


__all__ = ["best_match", "capability_matches", "parse_capability", "satisfies"]
