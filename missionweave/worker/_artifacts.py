"""An agent's (or a person's) Artifacts of one Group, through the Authority's grants.

The agent holds no artifact store: :func:`authority_artifacts` wraps an
:class:`~missionweave.authority.client.AuthorityClient` as a
:class:`~missionweave.artifacts.GatedArtifacts` whose every read and write is granted by the
Authority after its membership and context checks (MW-13.3-d).
"""

from __future__ import annotations

from collections.abc import Callable

from ..artifacts import ArtifactAccessDenied, ArtifactNotFound, GatedArtifacts
from ..authority.client import AuthorityClient, AuthorityRequestError
from ..authority.wire import ArtifactGrant, Operation
from ..protocol import Rejection, RejectionCode


def authority_artifacts(
    client: AuthorityClient,
    group_id: str,
    *,
    mission_id: str | None = None,
    lease_id: Callable[[], str | None] | None = None,
) -> GatedArtifacts:
    """``group_id``'s Artifacts, read and written through ``client``'s signed grants.

    Args:
        client: the Authority client (it signs the grant requests with the agent's key).
        group_id: the Group.
        mission_id: every read is for this Mission's context (a person's read names a Mission
            it may read): another Mission's content is refused (MW-13.3-d).
        lease_id: the current execution lease's id, asked at each read and write (it follows
            a renewal or a resume): an agent's reads are for its lease's Mission, and writes
            need it. Without a lease or a Mission, only an operator's key reads.

    Refusals arrive as :class:`ArtifactAccessDenied`, a missing Artifact as
    :class:`ArtifactNotFound`.
    """

    async def grant(content_hash: str, operation: Operation) -> ArtifactGrant:
        try:
            return await client.artifact_grant(
                group_id,
                content_hash,
                operation,
                mission_id=mission_id if operation == "read" else None,
                lease_id=lease_id() if lease_id is not None else None,
            )
        except AuthorityRequestError as exc:
            if exc.status == 404 and exc.code == RejectionCode.UNKNOWN_ARTIFACT:
                raise ArtifactNotFound(content_hash, f"group {group_id}") from None
            if exc.status == 422:
                raise ValueError(f"{exc.code}: {exc.reason}") from None
            rejection = Rejection(code=exc.code, reason=exc.reason, detail=exc.detail)
            raise ArtifactAccessDenied(rejection, content_hash) from None

    async def confirm(content_hash: str) -> int:
        held = lease_id() if lease_id is not None else None
        try:
            if held is None:
                raise AuthorityRequestError(
                    403, RejectionCode.LEASE_REQUIRED, "confirming an upload needs the lease", {}
                )
            return await client.artifact_uploaded(group_id, content_hash, held)
        except AuthorityRequestError as exc:
            rejection = Rejection(code=exc.code, reason=exc.reason, detail=exc.detail)
            raise ArtifactAccessDenied(rejection, content_hash) from None

    return GatedArtifacts(grant, client.base_url, group_id, http=client.transfers, confirm=confirm)
