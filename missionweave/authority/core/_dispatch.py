"""Command dispatch: which function applies a Command.

A Command naming a critical extension this Authority does not know is rejected
(``unsupported_extension``, MW-11.5-f); one carrying the bounded-offline binding goes to
:func:`._handlers_offline.reconcile`; any other to the handler registered for its type
(:data:`._registry.HANDLERS`).
"""

from __future__ import annotations

from ...protocol import BOUNDED_OFFLINE_EXECUTION, KNOWN_EXTENSIONS, Command, RejectionCode
from ._command_scope import Reject
from ._handlers_offline import reconcile
from ._registry import HANDLERS, Handler


def handler_for(cmd: Command) -> Handler:
    """The function that applies ``cmd``: :func:`~._handlers_offline.reconcile` for a Command
    carrying the bounded-offline binding, else the registered handler of its type.
    Implements MW-11.5-f.

    Raises:
        Reject: ``unsupported_extension`` — a critical extension this Authority does not know
            (MW-11.5-f), or one named critical but absent from ``extensions``;
            ``invalid_command`` — the bounded-offline binding not named critical.
    """
    for urn in cmd.critical_extensions:
        unsupported = (
            "the Command needs an extension this Authority does not know"
            if urn not in KNOWN_EXTENSIONS
            else "a critical extension has no value"
            if urn not in cmd.extensions
            else None
        )
        if unsupported is not None:
            raise Reject(RejectionCode.UNSUPPORTED_EXTENSION, unsupported, extension=urn)
    if BOUNDED_OFFLINE_EXECUTION in cmd.extensions:
        if BOUNDED_OFFLINE_EXECUTION not in cmd.critical_extensions:
            raise Reject(
                RejectionCode.INVALID_COMMAND,
                "the bounded-offline binding must be critical",
                extension=BOUNDED_OFFLINE_EXECUTION,
            )
        return reconcile
    return HANDLERS[cmd.type].fn


__all__ = ["handler_for"]
