"""What ``missionweave worker`` prints (issue 29 item 3): a handler's ``ctx.logger`` lines name
their WorkItem; a server's outage is one line when it begins and one when it ends, the retry
repeats of the Temporal SDK's core and of the Authority's stream dropped. The end-to-end line of a
real worker is checked in ``tests/metrics/test_scrape.py``."""

from __future__ import annotations

import logging

import pytest

from missionweave.cli._worker_log import ConnectionWatch, QuietRetries, WorkItemFormatter
from missionweave.metrics import CORE_LOGGER


def _record(name: str, msg: str, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord(name, logging.WARNING, __file__, 1, msg, (), None)
    record.__dict__.update(extra)
    return record


def test_a_handler_line_names_its_work_item_and_others_do_not() -> None:
    fmt = WorkItemFormatter("%(levelname)s %(name)s: %(message)s")
    line = fmt.format(_record("missionweave.handler", "waiting", work_item_id="m1:a"))
    assert line == "WARNING missionweave.handler: waiting [m1:a]"
    assert fmt.format(_record("missionweave.worker", "started")).endswith("started")


@pytest.mark.parametrize(
    ("name", "msg", "kept"),
    [
        (CORE_LOGGER, "Error when polling: tcp connect error: Connection refused", False),
        (CORE_LOGGER, "Workflow task failed: a real error", True),
        ("missionweave.authority.client._subscriber", "stream dropped: x; reconnecting", False),
        ("missionweave.worker._presence", "report not sent: ConnectError", False),
        ("missionweave.worker._presence", "session replaced by pid 7", True),
        ("missionweave.connection", "Temporal at x is unreachable (Connection refused)", True),
        ("httpx", "anything else", True),
    ],
)
def test_only_the_repeats_of_an_outage_are_dropped(name: str, msg: str, kept: bool) -> None:
    assert QuietRetries().filter(_record(name, msg)) is kept


async def test_an_outage_is_one_line_when_it_begins_and_one_when_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answers = [True, False, False, False, True, True]

    async def probe() -> None:
        if not answers.pop(0):
            raise ConnectionError("Connection refused")

    watch = ConnectionWatch("Temporal", "127.0.0.1:7233", probe, interval_s=0)
    with caplog.at_level(logging.WARNING, logger="missionweave.connection"):
        seen = [await watch.check() for _ in range(6)]
    assert seen == [True, False, False, False, True, True]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0] == (
        "Temporal at 127.0.0.1:7233 is unreachable (Connection refused); "
        "retrying quietly until it answers"
    )
    assert lines[1].startswith("Temporal at 127.0.0.1:7233 answers again (away ")
