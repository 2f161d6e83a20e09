"""``mission start``: WorkItem inputs a Mission could not carry inline go by reference."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..protocol import (
    INPUT_MEDIA_TYPE,
    goes_by_reference,
    input_json,
    input_problem,
    input_reference,
)
from ..protocol.temporal_contract import MissionSpec
from ._common import CliError

if TYPE_CHECKING:
    from ..artifacts import ArtifactStore


def by_reference(spec: MissionSpec, open_store: Callable[[], ArtifactStore]) -> MissionSpec:
    """``spec`` with every WorkItem input over
    :data:`~missionweave.protocol.MAX_INLINE_INPUT_BYTES` stored (as its JSON) in the artifact
    store ``open_store()`` opens — only when there is one — and given as
    ``{"$input_artifact": hash}``.

    Raises:
        CliError: the store cannot be opened or written, or the inputs that stay inline are
            still more than the Mission carries (``mission_inputs_too_large``).
    """
    big = [i for i in spec.items if goes_by_reference(i.input)]
    if big:
        store = open_store()
        items = []
        for item in spec.items:
            if item in big:
                try:
                    ref = store.put(input_json(item.input), INPUT_MEDIA_TYPE)
                except Exception as exc:  # the store's own error, in one line
                    raise CliError(
                        f"cannot store the input of WorkItem {item.work_item_id}: {exc}"
                    ) from None
                item = item.model_copy(update={"input": input_reference(ref.hash)})
            items.append(item)
        spec = spec.model_copy(update={"items": items})
    problem = input_problem((i.work_item_id, i.input) for i in spec.items)
    if problem is not None:
        raise CliError(f"invalid MissionSpec: {problem[0]}: {problem[1]}")
    return spec


__all__ = ["by_reference"]
