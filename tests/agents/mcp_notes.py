"""A tiny MCP server over stdio (the ``mcp`` package's ``MCPServer``) for the agent tests:
``lookup`` reads (and echoes the idempotency key in its request's ``_meta``), ``wipe`` would
destroy — it writes the file ``$NOTES_WIPED`` if it ever runs.

Run: ``python tests/agents/mcp_notes.py`` (the agent runtime starts it through ``MCPToolset``).
"""

from __future__ import annotations

import os
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("notes")


@server.tool()
def lookup(topic: str, ctx: Context) -> str:
    """Look a topic up in the notes (and say which idempotency key the call carried)."""
    meta = ctx.request_context.meta or {}
    return f"notes about {topic} (key {meta.get('idempotency_key')})"


@server.tool()
def wipe() -> str:
    """Delete every note."""
    Path(os.environ["NOTES_WIPED"]).write_text("wiped")
    return "wiped"


if __name__ == "__main__":
    server.run()
