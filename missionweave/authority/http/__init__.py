"""The Authority's HTTP + WebSocket server (protocol section 16).

``create_app(authority)`` builds the FastAPI app; ``serve(authority)`` runs it with uvicorn;
``BatchWriter`` is the group-commit writer the app submits through; ``ReadGate`` bounds the
large reads in flight; ``ConnectionLimits`` bound the connections that have not authenticated;
``server_limits()`` are the uvicorn settings every server runs with.
"""

from ._batch import BatchWriter
from ._connections import ConnectionLimits
from ._errors import ErrorBody
from ._limits import server_limits
from ._read_gate import ReadGate
from ._server import WS_MAX_BYTES, create_app, serve

__all__ = [
    "WS_MAX_BYTES",
    "BatchWriter",
    "ConnectionLimits",
    "ErrorBody",
    "ReadGate",
    "create_app",
    "serve",
    "server_limits",
]
