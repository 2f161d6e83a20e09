"""One execution's Artifacts under its lease: how ``WorkContext.publish`` and ``fetch`` reach
the Group's store.

The agent holds no store: each read and write is granted by the Authority after its
membership and context checks, for this Mission and under the current lease
(:func:`~._artifacts.authority_artifacts`). Publishing is externally visible, so it is fenced
(MW-11.5-d): the write grant is that fence — the Authority grants it only under this agent's
active, unexpired lease — so while nothing is buffered, nothing is known lost and the
capability token holds, no separate confirmation is asked first (one round trip a publish).
After an outage the full confirmation runs: it reconciles the offline buffer and waits for the
Authority within the lease's grace period.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from ..artifacts import (
    ArtifactAccessDenied,
    GatedArtifacts,
    LeaseInfo,
    PublishedArtifact,
    PublishRejected,
    publish_artifact,
)
from ._artifacts import authority_artifacts
from ._errors import LeaseLost
from ._lease import LeaseSession
from ._retry import Backoff, authority_away, retrying
from ._verdicts import FENCE_CODES


@dataclass(slots=True)
class LeasedArtifacts:
    """The Group's Artifacts as one execution reads and writes them.

    Attributes:
        session: the execution's lease session (client, actor, lease, clock).
        group_id: the Group whose store holds the content.
        mission_id: the Mission every read is for (MW-13.3-d).
        work_item_id: the WorkItem every publish is recorded under.
        agent_card_version: the agent's Agent Card version (recorded in manifests).
        logger: the handler's logger, with its ids.
    """

    session: LeaseSession
    group_id: str
    mission_id: str
    work_item_id: str
    agent_card_version: int
    logger: logging.LoggerAdapter[logging.Logger]
    _gate: GatedArtifacts | None = field(default=None, init=False)

    def store(self) -> GatedArtifacts:
        """The Group's store through the Authority's grants (made on first use)."""
        if self._gate is None:
            self._gate = authority_artifacts(
                self.session.client,
                self.group_id,
                mission_id=self.mission_id,
                lease_id=lambda: self.session.lease.lease_id,
            )
        return self._gate

    async def fetch(self, content_hash: str) -> bytes:
        """The content of ``content_hash``, its hash verified (``WorkContext.fetch`` says the
        rest)."""
        return await self.store().get(content_hash)

    async def publish(
        self, data: bytes | BinaryIO | os.PathLike[str], media_type: str, **manifest: Any
    ) -> PublishedArtifact:
        """Publish ``data`` under the current lease, fenced as the module says.

        A publish lost between its fence and its registration (the Authority went away) is
        made again every :data:`~._retry.FIRST_WAIT_S` for bytes and paths — same content,
        same hash, so again is safe — and each time the fence waits for the Authority until
        the grace deadline, then raises ``LeaseLost``.

        Args:
            data: bytes, a binary stream (read once) or a path.
            media_type: the content's IANA media type.
            **manifest: the other fields of :func:`~missionweave.artifacts.publish_artifact`
                (schema id, sources, classification, tool/model/capability versions).

        Raises:
            LeaseLost: the write grant or the registration was refused as the lease's fence
                says, or the Authority stayed unreachable past the grace deadline.
            PublishRejected: any other refusal of the registration.
            ArtifactAccessDenied: any other refusal of the write.
            AuthorityUnavailable: a stream whose registration did not reach the Authority.
        """
        fenced_by_grant = self.session.confirmed_by_next_request()

        async def once() -> PublishedArtifact:
            nonlocal fenced_by_grant
            if not fenced_by_grant:
                await self.session.confirm()
            fenced_by_grant = False
            return await self._publish_once(data, media_type, manifest)

        return await retrying(
            once,
            # a stream is read once: its caller publishes again
            when=lambda exc: authority_away(exc) and isinstance(data, (bytes, os.PathLike)),
            backoff=Backoff(),
            before_wait=lambda exc, _wait_s: self.logger.warning(
                "Authority unreachable while publishing (%s): again", exc
            ),
        )

    async def _publish_once(
        self, data: bytes | BinaryIO | os.PathLike[str], media_type: str, manifest: dict[str, Any]
    ) -> PublishedArtifact:
        lease = self.session.lease
        try:
            return await publish_artifact(
                self.store(),
                self.session.client,
                self.session.actor,
                self.group_id,
                LeaseInfo(self.work_item_id, lease.lease_id, lease.ownership_epoch),
                data,
                mission_id=self.mission_id,
                media_type=media_type,
                agent_card_version=self.agent_card_version,
                created_at_ms=self.session.clock(),
                **manifest,
            )
        except (PublishRejected, ArtifactAccessDenied) as exc:
            code = exc.code if isinstance(exc, PublishRejected) else exc.rejection.code
            if code in FENCE_CODES:
                self.session.lost = self.session.lost or LeaseLost(code, str(exc))
                raise self.session.lost from exc
            raise


__all__ = ["LeasedArtifacts"]
