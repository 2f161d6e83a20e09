"""The durable conversation: an agent's message history as an Artifact, its hash in the
checkpoint (the log stays small), and private reasoning taken out before anything leaves the
process (MW-13.2-d).
"""

from __future__ import annotations

from dataclasses import replace

from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    ThinkingPart,
)

from ..worker import WorkContext

#: The media type of a checkpointed conversation (Pydantic AI's message-history JSON).
CONVERSATION_MEDIA_TYPE = "application/vnd.missionweave.pydantic-ai-messages+json"


def without_private_reasoning(messages: list[ModelMessage]) -> list[ModelMessage]:
    """``messages`` without the model's private reasoning: every ``ThinkingPart`` is dropped
    (MW-13.2-d). The model is given the rest again when a run resumes; providers accept a
    history whose thinking was left out."""
    out: list[ModelMessage] = []
    for m in messages:
        if isinstance(m, ModelResponse) and any(isinstance(p, ThinkingPart) for p in m.parts):
            m = replace(m, parts=[p for p in m.parts if not isinstance(p, ThinkingPart)])
        out.append(m)
    return out


def encode(messages: list[ModelMessage]) -> bytes:
    """The JSON bytes of ``messages`` (private reasoning removed first). Implements MW-13.2-d."""
    return ModelMessagesTypeAdapter.dump_json(without_private_reasoning(messages))


async def save_history(ctx: WorkContext, messages: list[ModelMessage]) -> str:
    """Publish the conversation so far as an Artifact of this WorkItem — not a deliverable: it
    is not submitted — and return its SHA-256.

    Raises:
        LeaseLost: the lease is gone (publishing waits for a lease the Authority confirms).
        PublishRejected: the Authority refused the Artifact.
    """
    ref = await ctx.publish(encode(messages), CONVERSATION_MEDIA_TYPE, deliverable=False)
    return ref.hash


async def load_history(ctx: WorkContext, content_hash: str) -> list[ModelMessage]:
    """The conversation checkpointed as Artifact ``content_hash`` (SHA-256 verified).

    Raises:
        ArtifactNotFound: the store has no such Artifact.
        ArtifactIntegrityError: its bytes do not hash to ``content_hash``.
        pydantic.ValidationError: it is not a Pydantic AI message history.
    """
    return ModelMessagesTypeAdapter.validate_json(await ctx.fetch(content_hash))


__all__ = [
    "CONVERSATION_MEDIA_TYPE",
    "encode",
    "load_history",
    "save_history",
    "without_private_reasoning",
]
