"""Signed reads: every read of the Authority is an RFC 9421 HTTP Message Signature by a key.

A reader signs ``"@method"``, ``"@path"`` and ``"@query"`` of its request with its Ed25519 key
(the one it signs Commands with), with the parameters ``created`` (epoch seconds), ``nonce``
(random, base64url), ``keyid`` (the signer's public key, base64url: the key *is* the identity,
so nothing is looked up before the signature verifies), ``alg="ed25519"`` and
``tag="missionweave-read"``, under the label ``mw``::

    Signature-Input: mw=("@method" "@path" "@query");created=1767225600;nonce="…";
                     keyid="<public key>";alg="ed25519";tag="missionweave-read"
    Signature: mw=:<64 bytes, base64>:

The Authority (:class:`ReadVerifier`) refuses a request whose signature does not verify, whose
``created`` is more than :data:`MAX_SKEW_MS` from its clock, or whose nonce the same key used
within that window (a replay). Which Groups the key may read is the caller's policy
(``_server``), which remembers a nonce only once the key is allowed.
The signatures themselves come from the ``http-message-signatures`` package.
"""

from __future__ import annotations

import datetime
import heapq
import os
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx
from http_message_signatures import (
    HTTPMessageSigner,
    HTTPMessageVerifier,
    HTTPSignatureKeyResolver,
    algorithms,
)
from http_message_signatures.exceptions import HTTPMessageSignaturesException

from ...protocol import (
    RejectionCode,
    SignatureError,
    SigningKey,
    b64u_decode,
    b64u_encode,
    load_public_key,
)

#: How far a signed frame's or read's creation time may be from the Authority's clock, in
#: milliseconds (5 minutes); the replay window of signed reads is as long.
MAX_SKEW_MS = 300_000
#: The signature's label and application tag.
LABEL, TAG = "mw", "missionweave-read"
#: The request components a read signature covers.
COVERED = ("@method", "@path", "@query")
#: What a 401 asks for (RFC 9421 section 5.1).
ACCEPT_SIGNATURE = f'{LABEL}=("@method" "@path" "@query");alg="ed25519";tag="{TAG}"'
#: Nonces remembered at once, all keys together; past this, reads are refused (429) until old
#: ones expire. Only keys allowed to read take room, so strangers cannot fill it.
MAX_NONCES = 500_000
#: Nonces one key may hold at once (about 330 signed reads a second for the 5-minute window).
MAX_NONCES_PER_KEY = 100_000


@dataclass(slots=True)
class _Message:
    """The request as the signature library sees it: method, whole URL, header fields."""

    method: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)


class _NoKeys(HTTPSignatureKeyResolver):
    """Signing is external (:meth:`SigningKey.sign`); keys are resolved by ``keyid``."""

    def resolve_public_key(self, key_id: str) -> Any:
        try:
            return load_public_key(key_id)
        except SignatureError:
            return None

    def resolve_private_key(self, key_id: str) -> Any:  # pragma: no cover - never asked
        raise KeyError(key_id)


def sign_read(
    method: str, url: str, key: SigningKey, *, created_s: int | None = None
) -> dict[str, str]:
    """The ``Signature-Input`` and ``Signature`` headers of a read of ``url`` by ``key``.

    Args:
        method: the HTTP method (``"GET"``).
        url: the whole request URL as sent (scheme, host, percent-encoded path and query).
        key: the reader's key.
        created_s: the creation time, epoch seconds; now by default.
    """
    created = datetime.datetime.fromtimestamp(
        created_s if created_s is not None else datetime.datetime.now().timestamp(),
        tz=datetime.UTC,
    )
    message = _Message(method.upper(), url)
    signer = HTTPMessageSigner(signature_algorithm=algorithms.ED25519)
    prepared = signer.prepare(
        message,
        key_id=key.public_key,
        created=created,
        label=LABEL,
        tag=TAG,
        nonce=b64u_encode(os.urandom(18)),
        covered_component_ids=COVERED,
    )
    signer.apply(message, prepared, b64u_decode(key.sign(prepared.signature_base)))
    return {k: v for k, v in message.headers.items()}


class SignedReads(httpx.Auth):
    """httpx authentication that signs every ``GET`` — and every request without a body,
    such as ``POST …/artifacts/{hash}/upload`` — with ``key`` (:func:`sign_read`).

    Args:
        key: the reader's key.
        clock: epoch milliseconds for ``created``; the wall clock by default (tests whose
            Authority runs on a virtual clock pass that clock).
    """

    def __init__(self, key: SigningKey, clock: Callable[[], int] | None = None) -> None:
        self.key, self.clock = key, clock

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        if request.method == "GET" or not request.content:  # a read, or a bodiless request
            # (an S3 upload's confirmation: who asks is all it carries)
            created = self.clock() // 1000 if self.clock is not None else None
            request.headers.update(
                sign_read(request.method, str(request.url), self.key, created_s=created)
            )
        yield request


class _AuthorityClockVerifier(HTTPMessageVerifier):
    """The library's verifier, with ``created`` left to :class:`ReadVerifier`, which checks it
    against the Authority's (injectable) clock rather than the wall clock."""

    def validate_created_and_expires(self, sig_input: Any, max_age: Any = None) -> None:
        return None


class ReadRefused(Exception):
    """A read is refused; the server answers ``status`` with ``{code, reason, detail}``.

    Codes: 401 ``unauthenticated`` (no signature, a bad one, a stale ``created``, a replayed
    nonce), 403 ``not_a_member`` (the key may not read that Group), 429 ``too_many_requests``
    (the nonce memory is full).
    """

    def __init__(self, status: int, code: str, reason: str, **detail: Any) -> None:
        super().__init__(reason)
        self.status, self.code, self.reason, self.detail = status, code, reason, detail


@dataclass(frozen=True, slots=True)
class SignedRead:
    """A read whose signature verified: the signer's public key, its nonce and ``created``
    (epoch milliseconds). Not yet remembered: :meth:`ReadVerifier.remember` it once the key
    is known to be allowed, so a stranger's reads never take room in the nonce memory."""

    key: str
    nonce: str
    created_ms: int


class ReadVerifier:
    """Checks signed reads (and signed frames' nonces) against one clock; remembers nonces.

    Args:
        clock: the Authority's clock, epoch milliseconds.
        max_skew_ms: how far ``created`` may be from ``clock``, milliseconds; a nonce is
            remembered while its ``created`` is within that window.
        max_nonces: nonces remembered at once, all keys together.
        max_nonces_per_key: nonces remembered at once for one key.

    Thread safety: call from one event loop (the server's); it does no I/O.
    """

    def __init__(
        self,
        clock: Callable[[], int],
        *,
        max_skew_ms: int = MAX_SKEW_MS,
        max_nonces: int = MAX_NONCES,
        max_nonces_per_key: int = MAX_NONCES_PER_KEY,
    ) -> None:
        self._clock = clock
        self._skew = max_skew_ms
        self._max = max_nonces
        self._max_per_key = max_nonces_per_key
        self._nonces: dict[tuple[str, str], bool] = {}  # (key, nonce) -> an operator's
        self._expiry: list[tuple[int, str, str]] = []  # heap of (forget at ms, key, nonce)
        self._per_key: dict[str, int] = {}
        self._operators = 0
        self._verifier = _AuthorityClockVerifier(
            signature_algorithm=algorithms.ED25519, key_resolver=_NoKeys()
        )

    def verify(
        self, method: str, url: str, headers: Iterable[tuple[str, str]]
    ) -> SignedRead | None:
        """The verified read, or ``None`` for a request with no signature at all.

        Args:
            method: the HTTP method.
            url: the request URL as received (raw, percent-encoded path and query).
            headers: the request's header fields (any case).

        Raises:
            ReadRefused: a signature is present but does not verify, has no usable nonce, or
                was created more than ``max_skew_ms`` from the clock.
        """
        fields = {k.lower(): v for k, v in headers if k.lower() in ("signature", "signature-input")}
        if not fields:
            return None
        try:
            (result,) = self._verifier.verify(
                _Message(method.upper(), url, fields),
                max_age=None,
                expect_tag=TAG,
                require_components=COVERED,
            )
        except (HTTPMessageSignaturesException, ValueError) as exc:
            raise ReadRefused(
                401,
                RejectionCode.UNAUTHENTICATED,
                f"the read's signature does not verify ({str(exc) or type(exc).__name__})",
            ) from None
        params = result.parameters
        created, nonce, key = params.get("created"), params.get("nonce"), params.get("keyid")
        if not isinstance(created, int):
            raise ReadRefused(
                401, RejectionCode.UNAUTHENTICATED, "the read's signature needs created"
            )
        self.check_fresh(created * 1000, nonce)
        assert isinstance(nonce, str)
        return SignedRead(str(key), nonce, created * 1000)

    def check_fresh(self, created_ms: int, nonce: object) -> None:
        """Refuse a ``created_ms`` outside the window or a nonce of the wrong shape.

        Raises:
            ReadRefused: 401 ``unauthenticated``.
        """
        now = self._clock()
        if abs(created_ms - now) > self._skew:
            raise ReadRefused(
                401,
                RejectionCode.UNAUTHENTICATED,
                f"the signature was created more than {self._skew} ms from the Authority's clock",
                created_ms=created_ms,
                server_time_ms=now,
            )
        if not isinstance(nonce, str) or not 16 <= len(nonce) <= 64:
            raise ReadRefused(
                401,
                RejectionCode.UNAUTHENTICATED,
                "a signature needs a nonce of 16 to 64 characters",
            )

    def remember(self, key: str, nonce: str, created_ms: int, *, operator: bool = False) -> None:
        """Record ``key``'s ``nonce``; refuse it if seen within the window (a replay).

        Args:
            key: who signed (a public key, or ``agent:<id>`` for frames).
            nonce: the signature's nonce.
            created_ms: its creation time, epoch milliseconds: it is forgotten once that is
                out of the window.
            operator: an operator's nonce counts against its own per-key bound only, so
                members of any Group together cannot lock an operator out.

        Raises:
            ReadRefused: 401 ``unauthenticated`` for a replay; 429 ``too_many_requests`` when
                this key, or all (non-operator) keys together, hold as many live nonces as
                allowed.
        """
        now = self._clock()
        self._forget(now)
        if (key, nonce) in self._nonces:
            raise ReadRefused(
                401, RejectionCode.UNAUTHENTICATED, "this signed request was seen before (a replay)"
            )
        full = not operator and len(self._nonces) - self._operators >= self._max
        if full or self._per_key.get(key, 0) >= self._max_per_key:
            raise ReadRefused(
                429,
                RejectionCode.TOO_MANY_REQUESTS,
                "too many signed requests in the replay window",
            )
        until = max(created_ms + self._skew, now) + 1
        self._nonces[(key, nonce)] = operator
        heapq.heappush(self._expiry, (until, key, nonce))
        self._per_key[key] = self._per_key.get(key, 0) + 1
        self._operators += operator

    def _forget(self, now: int) -> None:
        # a heap by expiry: one nonce dated far ahead holds back nothing else
        while self._expiry and self._expiry[0][0] <= now:
            _, key, nonce = heapq.heappop(self._expiry)
            self._operators -= self._nonces.pop((key, nonce))
            left = self._per_key[key] - 1
            if left:
                self._per_key[key] = left
            else:
                del self._per_key[key]


__all__ = [
    "ACCEPT_SIGNATURE",
    "MAX_NONCES",
    "MAX_NONCES_PER_KEY",
    "MAX_SKEW_MS",
    "ReadRefused",
    "ReadVerifier",
    "SignedRead",
    "SignedReads",
    "sign_read",
]
