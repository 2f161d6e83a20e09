"""A WorkItem's input inline or by reference (a claim check), and how much of it a Mission
carries.

The Mission workflow carries every unfinished WorkItem's input in its state, through every
continue-as-new, and Temporal refuses a payload over 2 MiB (a workflow task that cannot
complete, for ever). So an input is carried inline only up to :data:`MAX_INLINE_INPUT_BYTES`,
and the inline inputs of one Mission's unfinished WorkItems together up to
:data:`MAX_CARRIED_INPUT_BYTES`. A larger input goes to the artifact store as a JSON Artifact and
the WorkItem carries only its reference, ``{"$input_artifact": "<sha256 hex>"}``: the agent's
runtime fetches the content, verifies its hash (MW-13.1-d) and hands the handler the input it
holds, so a handler never sees the difference. ``WorkContext.authorize_work`` and ``missionweave
mission start`` put large inputs by reference themselves.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ._artifacts import is_hash
from ._rejection_codes import RejectionCode

#: The one key of an input given by reference: ``{INPUT_ARTIFACT_KEY: "<sha256 hex>"}``.
INPUT_ARTIFACT_KEY = "$input_artifact"
#: Media type of an input stored as an Artifact (its content is :func:`input_json`).
INPUT_MEDIA_TYPE = "application/json"
#: Largest input, bytes of :func:`input_json`, a Mission carries inline; larger ones go by
#: reference (well under Temporal's 512 KiB payload warning).
MAX_INLINE_INPUT_BYTES = 64 * 1024
#: Most bytes of inline input the unfinished WorkItems of one Mission carry together: what
#: every continue-as-new hands over, beside the rest of the state, under Temporal's 2 MiB.
MAX_CARRIED_INPUT_BYTES = 512 * 1024


def input_json(value: Mapping[str, Any]) -> bytes:
    """The input as compact UTF-8 JSON with sorted keys: the bytes that are counted, and the
    content of the Artifact when it goes by reference. Deterministic (safe in a workflow).

    Raises:
        TypeError, ValueError: ``value`` is not JSON (a NaN, a non-string key, an object).
    """
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode()


def input_bytes(value: Mapping[str, Any]) -> int:
    """Bytes of ``value`` as :func:`input_json` (``0`` for an empty input)."""
    return len(input_json(value)) if value else 0


def input_reference(content_hash: str) -> dict[str, str]:
    """The input that names Artifact ``content_hash`` (a JSON object) as the real input.

    Raises:
        ValueError: ``content_hash`` is not 64 lowercase hex characters.
    """
    if not is_hash(content_hash):
        raise ValueError(f"{content_hash!r} is not a SHA-256 hex hash")
    return {INPUT_ARTIFACT_KEY: content_hash}


def referenced_input(value: Mapping[str, Any]) -> str | None:
    """The Artifact hash when ``value`` is an input by reference, else ``None`` (inline)."""
    if len(value) != 1 or INPUT_ARTIFACT_KEY not in value:
        return None
    h = value[INPUT_ARTIFACT_KEY]
    return h if is_hash(h) else None


def goes_by_reference(value: Mapping[str, Any], threshold: int = MAX_INLINE_INPUT_BYTES) -> bool:
    """Whether ``value`` is to be stored as an Artifact and passed by reference: it is inline
    (not a reference already) and its JSON is over ``threshold`` bytes. ``mission start`` and
    ``ctx.authorize_work`` both decide by it."""
    return referenced_input(value) is None and input_bytes(value) > threshold


def input_problem(
    inputs: Iterable[tuple[str, Mapping[str, Any]]], carried_bytes: int = 0
) -> tuple[str, str, dict[str, Any]] | None:
    """Whether a Mission can carry these new inputs, beside ``carried_bytes`` it carries already.

    Args:
        inputs: ``(work_item_id, input)`` of the new WorkItems.
        carried_bytes: inline input bytes of the Mission's unfinished WorkItems now.

    Returns:
        ``None``, or the refusal ``(code, reason, detail)``: ``input_too_large`` (one input over
        :data:`MAX_INLINE_INPUT_BYTES`; detail ``work_item_id``, ``bytes``, ``max_bytes``) or
        ``mission_inputs_too_large`` (the total would pass :data:`MAX_CARRIED_INPUT_BYTES`;
        detail ``bytes``, ``carried_bytes``, ``max_bytes``). Both say to pass the input by
        reference.
    """
    total = carried_bytes
    for work_item_id, value in inputs:
        size = input_bytes(value)
        if size > MAX_INLINE_INPUT_BYTES:
            return (
                RejectionCode.INPUT_TOO_LARGE,
                f"the input of WorkItem {work_item_id} is {size} bytes, over the "
                f"{MAX_INLINE_INPUT_BYTES} a Mission carries inline: store it as an Artifact "
                f"and give {{{INPUT_ARTIFACT_KEY!r}: <hash>}} (ctx.authorize_work and "
                "`mission start` do it for you)",
                {"work_item_id": work_item_id, "bytes": size, "max_bytes": MAX_INLINE_INPUT_BYTES},
            )
        total += size
    if total > MAX_CARRIED_INPUT_BYTES:
        return (
            RejectionCode.MISSION_INPUTS_TOO_LARGE,
            f"the unfinished WorkItems' inline inputs would come to {total} bytes, over the "
            f"{MAX_CARRIED_INPUT_BYTES} a Mission carries: pass inputs by reference "
            f"({{{INPUT_ARTIFACT_KEY!r}: <hash>}})",
            {"bytes": total, "carried_bytes": carried_bytes, "max_bytes": MAX_CARRIED_INPUT_BYTES},
        )
    return None


__all__ = [
    "INPUT_ARTIFACT_KEY",
    "INPUT_MEDIA_TYPE",
    "MAX_CARRIED_INPUT_BYTES",
    "MAX_INLINE_INPUT_BYTES",
    "goes_by_reference",
    "input_bytes",
    "input_json",
    "input_problem",
    "input_reference",
    "referenced_input",
]
