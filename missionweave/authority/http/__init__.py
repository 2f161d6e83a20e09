"""The Authority's HTTP + WebSocket server (protocol section 16).

``create_app(authority)`` builds the FastAPI app; ``serve(authority)`` runs it with uvicorn;
``BatchWriter`` is the group-commit writer the app submits through.
"""

from ._batch import BatchWriter
from ._server import WS_MAX_BYTES, ErrorBody, create_app, serve

__all__ = ["WS_MAX_BYTES", "BatchWriter", "ErrorBody", "create_app", "serve"]
