"""The published OpenAPI document is what the Authority answers: schemathesis, every check,
against a live ``authority serve`` on loopback, with signed reads (issue: "who may read")."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import checks as st_checks

from missionweave.authority.wire._readsig import sign_read
from missionweave.protocol import Actor
from tests.support.cli_processes import authority_serve
from tests.support.world import make_world

#: Examples per operation: enough to reach every branch of the small routes, bounded in time
#: (``make conformance`` runs 100).
EXAMPLES = int(os.environ.get("MISSIONWEAVE_SCHEMATHESIS_EXAMPLES", "25"))


class _SignedReads(requests.auth.AuthBase):
    """requests auth signing every GET like the client (schemathesis speaks requests)."""

    def __init__(self, reader: Actor) -> None:
        self.reader = reader

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        if r.method == "GET" and r.url:
            r.headers.update(sign_read("GET", r.url, self.reader.key))
        return r


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Actor]]:
    """``authority serve`` over a small Group; its URL and a member who reads."""
    tmp = tmp_path_factory.mktemp("openapi")
    w = make_world(tmp / "a.db")
    w.authorize("a")
    reader = w.workers[0]
    key = tmp / "authority.pem"
    w.authority.key.to_file(key)
    w.authority.close()
    with authority_serve(tmp / "a.db", "--key", str(key)) as (url, _):
        yield url, reader


def test_server_answers_as_its_openapi_document_says(served: tuple[str, Actor]) -> None:
    """Every operation, every schemathesis check: no 5xx, no undocumented status, bodies of
    the documented shape, ``Allow`` on 405, bad data refused. Failures are collected and
    reported together, each with its operation."""
    url, reader = served
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    session = requests.Session()
    session.auth = _SignedReads(reader)
    failures: list[str] = []
    operations = [r.ok() for r in schema.get_all_operations()]
    assert len(operations) >= 10

    for op in operations:

        @given(case=op.as_strategy())
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def run(case: Any) -> None:
            case.call_and_validate(session=session, checks=list(_all_checks()))

        try:
            run()
        except BaseExceptionGroup as exc:  # schemathesis' failures: report them with the rest
            lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
            heads = [ln for ln in lines if ln.startswith(("- ", "+", "1.", "2.", "3."))][:6]
            failures.append(f"{op.label}: {type(exc).__name__}: {' | '.join(heads or lines[:3])}")
    assert not failures, "\n".join(sorted(set(failures)))


def _all_checks() -> Iterator[Any]:
    """Every schemathesis check but ``positive_data_acceptance``, which expects a schema-valid
    request to succeed: a schema cannot say "the signature verifies", so a schema-valid
    Command or presence report with a made-up signature is refused (409 ``bad_signature``,
    403), and so is one that breaks the identifier rule or a state rule (docs/authority.md,
    "Security model", lists this one exception)."""
    names = (
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
        "negative_data_rejection",
        "unsupported_method",
        "missing_required_header",
        "allow_header_conformance",
        "ignored_auth",
        "use_after_free",
        "ensure_resource_availability",
    )
    for name in names:
        check = getattr(st_checks, name, None)
        if check is not None:
            yield check
