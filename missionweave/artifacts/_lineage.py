"""Provenance trees of Artifacts (MW-13.1-c) and their text and Mermaid renderings."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from ..protocol import EventType, SignedManifest, verify_manifest
from ._errors import ManifestError
from ._store import check_hash


class ManifestSource(Protocol):
    """Where :func:`build_lineage` finds manifests: a :class:`ManifestIndex`, or
    :class:`LogManifests` read from a Group's log."""

    def get(self, content_hash: str) -> list[SignedManifest]:
        """Every manifest recorded for ``content_hash``."""
        ...


class LogManifests:
    """The manifests of ``artifact.published`` Events (a Group's log read by a member), by
    Artifact hash: the lineage a member may see, without any store (MW-13.1-c).

    Args:
        events: Events of one Group; other types are skipped, unusable manifests too.
    """

    def __init__(self, events: Iterable[object]) -> None:
        self._by_hash: dict[str, list[SignedManifest]] = {}
        for ev in events:
            if getattr(ev, "type", None) != EventType.ARTIFACT_PUBLISHED:
                continue
            try:
                signed = SignedManifest.model_validate(getattr(ev, "body", {})["manifest"])
            except (KeyError, TypeError, ValueError):
                continue
            self._by_hash.setdefault(signed.manifest.content_hash, []).append(signed)

    def get(self, content_hash: str) -> list[SignedManifest]:
        """The manifests published for ``content_hash`` (signatures not checked here)."""
        return list(self._by_hash.get(check_hash(content_hash), ()))


class LineageStatus(StrEnum):
    """What a provenance node's expansion found (the value is what ``--json`` shows)."""

    #: at least one manifest verifies
    OK = "ok"
    #: the index holds none
    NO_MANIFEST = "no_manifest"
    #: it holds some but none verifies (their sources are not followed)
    UNVERIFIED = "unverified"
    #: the hash is its own ancestor (not expanded again)
    CYCLE = "cycle"
    #: too deep
    DEPTH_LIMIT = "depth_limit"


@dataclass(eq=False)
class LineageNode:
    """One Artifact in a provenance tree.

    A hash reached along two paths (a diamond) is expanded once: both parents hold the same
    node object. A hash reached from its own descendants is a fresh ``cycle`` node without
    sources, so the structure is always finite.

    Attributes:
        hash: the Artifact's SHA-256 hex.
        manifests: its verified manifests (each names ``hash`` as its content).
        sources: nodes of the Artifacts it was derived from (union over ``manifests``).
        status: see :data:`LineageStatus`.
        rejected: manifests in the index that did not verify or named other content.
    """

    hash: str
    manifests: list[SignedManifest] = field(default_factory=list)
    sources: list[LineageNode] = field(default_factory=list)
    status: LineageStatus = LineageStatus.OK
    rejected: int = 0

    def walk(self) -> Iterator[LineageNode]:
        """Every distinct node once, depth first, this one first."""
        seen: set[int] = set()
        stack = [self]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            yield node
            stack.extend(reversed(node.sources))


def build_lineage(
    index: ManifestSource,
    content_hash: str,
    *,
    public_keys: Mapping[str, str] | None = None,
    max_depth: int = 256,
) -> LineageNode:
    """Build the provenance tree of ``content_hash`` from ``index``.

    A manifest counts only when it names ``content_hash`` as its content and its signature
    verifies: under ``public_keys[producer]`` when a key map is given, else under the key it
    carries. Only verified manifests' ``sources`` are followed.

    Args:
        index: where the manifests are.
        content_hash: the Artifact to trace.
        public_keys: producer agent id → base64url public key, to pin producers' keys.
        max_depth: ancestors deeper than this become ``depth_limit`` nodes.

    The walk is iterative: a chain of any depth costs memory, never a ``RecursionError``.

    Raises:
        ValueError: ``content_hash`` is malformed.
    """
    check_hash(content_hash)
    done: dict[str, LineageNode] = {}
    on_path: set[str] = set()

    def enter(h: str, depth: int) -> tuple[LineageNode, list[str]] | LineageNode:
        """A finished node (cycle, shared, too deep), or a new node and its sources to visit."""
        if h in on_path:
            return LineageNode(h, status=LineageStatus.CYCLE)
        if h in done:
            return done[h]
        if depth > max_depth:
            return LineageNode(h, status=LineageStatus.DEPTH_LIMIT)
        try:
            candidates = index.get(h)
            corrupt = 0
        except ManifestError:
            candidates, corrupt = [], 1
        good = [m for m in candidates if _verifies(m, h, public_keys)]
        node = LineageNode(h, manifests=good, rejected=len(candidates) - len(good) + corrupt)
        if not good:
            node.status = LineageStatus.UNVERIFIED if node.rejected else LineageStatus.NO_MANIFEST
        on_path.add(h)
        return node, sorted({s for m in good for s in m.manifest.sources})

    # An explicit stack, not recursion: a chain of any depth costs memory, never the
    # interpreter's stack (a deep manifest chain raised RecursionError). Each frame is a node
    # whose sources are being visited, the ones still to visit and its depth.
    first = enter(content_hash, 0)
    if isinstance(first, LineageNode):
        return first
    stack: list[tuple[LineageNode, list[str], int]] = [(first[0], first[1][::-1], 0)]
    while True:
        node, todo, depth = stack[-1]
        if todo:
            got = enter(todo.pop(), depth + 1)
            if isinstance(got, LineageNode):
                node.sources.append(got)
            else:
                stack.append((got[0], got[1][::-1], depth + 1))
            continue
        stack.pop()
        on_path.discard(node.hash)
        done[node.hash] = node
        if not stack:
            return node
        stack[-1][0].sources.append(node)


def _verifies(m: SignedManifest, h: str, public_keys: Mapping[str, str] | None) -> bool:
    if m.manifest.content_hash != h:
        return False
    key = m.public_key if public_keys is None else public_keys.get(m.manifest.producer)
    return key is not None and verify_manifest(m, key)


def _describe(node: LineageNode) -> str:
    if node.status is not LineageStatus.OK:
        extra = f", {node.rejected} rejected" if node.rejected else ""
        return f"({node.status.replace('_', ' ')}{extra})"
    m = node.manifests[0].manifest
    more = f" (+{len(node.manifests) - 1} more manifests)" if len(node.manifests) > 1 else ""
    return (
        f"{m.media_type} {m.size_bytes} B by {m.producer} "
        f"[mission {m.mission_id}, item {m.work_item_id}, {m.classification.value}]{more}"
    )


def to_text(tree: LineageNode) -> str:
    """The tree as indented lines, one Artifact per line; a subtree already shown is marked
    ``(see above)`` instead of being repeated."""
    lines: list[str] = []
    shown: set[int] = set()
    stack = [(tree, "", "")]  # depth first, in order; iterative for chains of any depth
    while stack:
        node, prefix, connector = stack.pop()
        repeat = id(node) in shown and node.sources
        lines.append(
            f"{prefix}{connector}{node.hash}  {_describe(node)}{'  (see above)' if repeat else ''}"
        )
        shown.add(id(node))
        if repeat:
            continue
        child_prefix = prefix + ("" if not connector else "    " if connector == "└── " else "│   ")
        last = len(node.sources) - 1
        for i in range(last, -1, -1):
            stack.append((node.sources[i], child_prefix, "└── " if i == last else "├── "))
    return "\n".join(lines) + "\n"


def _label(node: LineageNode) -> str:
    if node.status is not LineageStatus.OK:
        text = f"{node.hash[:12]}<br/>{node.status.replace('_', ' ')}"
    else:
        m = node.manifests[0].manifest
        text = f"{node.hash[:12]}<br/>{m.media_type}<br/>{m.producer} · {m.work_item_id}"
    return text.replace('"', "#quot;")


def to_mermaid(tree: LineageNode) -> str:
    """The provenance graph as a Mermaid flowchart: one node per Artifact, an arrow from each
    source to what was derived from it (a cycle shows as a loop, a diamond as a join)."""
    lines = [
        "flowchart BT",
        "    %% arrows point from a source Artifact to what was derived from it",
    ]
    declared: set[str] = set()
    edges: list[str] = []
    for node in tree.walk():
        if node.status is LineageStatus.CYCLE:
            continue  # an ancestor's hash: declared with that ancestor, the edge drawn below
        if node.hash not in declared:
            declared.add(node.hash)
            lines.append(f'    a{node.hash[:16]}["{_label(node)}"]')
        for src in node.sources:
            edge = f"    a{src.hash[:16]} --> a{node.hash[:16]}"
            if edge not in edges:
                edges.append(edge)
    return "\n".join([*lines, *edges]) + "\n"
