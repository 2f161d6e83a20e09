"""WorkItem inputs by reference, on the agent's side (a claim check).

A Mission carries an input inline only up to :data:`~missionweave.protocol.MAX_INLINE_INPUT_BYTES`
(it travels through every continue-as-new under Temporal's 2 MiB payload limit). Larger ones
are stored as a JSON Artifact and the WorkItem carries ``{"$input_artifact": hash}``:
:func:`offload_inputs` does that for :meth:`WorkContext.authorize_work`, and
:func:`resolve_input` turns the reference back into the input before the handler sees it,
through the context's own :meth:`~WorkContext.fetch` (the hash verified, MW-13.1-d; the
store's access rules applied).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..protocol import (
    INPUT_MEDIA_TYPE,
    MAX_INLINE_INPUT_BYTES,
    goes_by_reference,
    input_json,
    input_reference,
    referenced_input,
)
from ..protocol.temporal_contract import WorkItemSpec
from ._errors import WorkerError

if TYPE_CHECKING:
    from ._context import WorkContext


class InputUnavailable(WorkerError):
    """The Artifact an input names could not be read or is not a JSON object.

    Attributes:
        content_hash: the Artifact named.
    """

    def __init__(self, content_hash: str, reason: str) -> None:
        super().__init__(f"input artifact {content_hash}: {reason}")
        self.content_hash = content_hash


async def resolve_input(ctx: WorkContext, value: Mapping[str, Any]) -> dict[str, Any]:
    """The input the handler gets: ``value`` itself, or the JSON object stored in the
    Artifact it names (``{"$input_artifact": hash}``), fetched through ``ctx.fetch``.

    Raises:
        InputUnavailable: the Artifact is missing, fails its hash check, or is not a JSON
            object (the cause chained).
    """
    content_hash = referenced_input(value)
    if content_hash is None:
        return dict(value)
    try:
        raw = await ctx.fetch(content_hash)
    except Exception as exc:  # not found, corrupt, refused, store down: the handler cannot run
        raise InputUnavailable(content_hash, f"{type(exc).__name__}: {exc}") from exc
    try:
        loaded = json.loads(raw)
    except ValueError as exc:
        raise InputUnavailable(content_hash, f"not JSON ({exc})") from None
    if not isinstance(loaded, dict):
        raise InputUnavailable(content_hash, "not a JSON object")
    return loaded


async def offload_inputs(
    ctx: WorkContext, specs: list[WorkItemSpec], *, threshold: int = MAX_INLINE_INPUT_BYTES
) -> list[WorkItemSpec]:
    """``specs`` with every input over ``threshold`` bytes (of its JSON) replaced by a
    reference to an Artifact holding it, published by this WorkItem (a signed manifest under
    its lease, MW-13.1-b) but not one of its deliverables.

    Raises:
        LeaseLost, PublishRejected, AuthorityUnavailable, ArtifactStoreError, WorkerError: as
            :meth:`WorkContext.publish`.
    """
    out = []
    for spec in specs:
        if goes_by_reference(spec.input, threshold):
            ref = await ctx._publish_input(input_json(spec.input), INPUT_MEDIA_TYPE)
            spec = spec.model_copy(update={"input": input_reference(ref)})
        out.append(spec)
    return out


__all__ = ["InputUnavailable", "offload_inputs", "resolve_input"]
