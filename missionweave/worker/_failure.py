"""What a handler's failure says in the signed log (MW-11.4-f): a code and a summary, never
the host's paths or a traceback.

Every member of the Group replays the log, so ``work.failed``'s Evidence carries only
``Type: message`` — the exception's type name (the code) and its message with absolute file
paths replaced by ``<path>``, at most :data:`MAX_SUMMARY_CHARS` characters. The traceback goes
to the agent's own log (``log.warning(..., exc_info=...)`` in the executor), where its
operator reads it.
"""

from __future__ import annotations

import re
from typing import Final

#: Longest failure summary, in characters (well under the Evidence summary's 2,000).
MAX_SUMMARY_CHARS: Final = 500
#: What a redacted path reads as.
REDACTED_PATH: Final = "<path>"

# An absolute path: POSIX (``/home/u/x.py``, ``~/x``), a ``file:`` URL's, or Windows
# (``C:\\Users\\u\\x.py``, ``\\\\server\\share``). A POSIX path starts after white space, a
# quote, a bracket, ``=`` or ``:`` (``file:/…``) — never inside a word or after a scheme's
# ``//`` (``https://host/a`` keeps its path: it names no file of this host).
_PATH = re.compile(
    r"""file:/+[^\s'"()\[\]{}<>,]*"""
    r"""|(?:(?<=^)|(?<=[\s'"(\[{<=,:]))(?<!//)"""
    r"""(?:~?/(?!/)[^\s'"()\[\]{}<>,:]+"""
    r"""|[A-Za-z]:[\\/][^\s'"()\[\]{}<>,]*"""
    r"""|\\\\[^\s'"()\[\]{}<>,]+)"""
)


def redact_paths(text: str) -> str:
    """``text`` with every absolute file path replaced by :data:`REDACTED_PATH`."""
    return _PATH.sub(REDACTED_PATH, text)


def describe_failure(exc: BaseException) -> str:
    """A handler's exception as ``work.failed``'s Evidence reports it: ``Type: message``, the
    type's name being the failure's code and the message's absolute paths redacted; one line
    (line breaks become spaces), at most :data:`MAX_SUMMARY_CHARS` characters. No traceback:
    that stays in the agent's own log."""
    message = " ".join(str(exc).split())
    text = redact_paths(f"{type(exc).__name__}: {message}" if message else type(exc).__name__)
    return text if len(text) <= MAX_SUMMARY_CHARS else text[: MAX_SUMMARY_CHARS - 3] + "..."


__all__ = ["MAX_SUMMARY_CHARS", "REDACTED_PATH", "describe_failure", "redact_paths"]
