"""What every benchmark here shares: its command line's frame and how it prints its figures.

Each ``bench/*.py`` script is run as ``python bench/<name>.py``; this directory is then first
on ``sys.path``, so they import this module as ``_figures``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any


class DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """The standard library's help with each option's default, except where there is none to
    name (``None``) or the option is a flag (``False``): the default is written once, in
    ``add_argument(default=...)``."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


def parser(doc: str | None, *, json_help: str = "print one JSON object") -> argparse.ArgumentParser:
    """The benchmark's argument parser: described by the first line of its module docstring
    ``doc``, with ``--json`` (``json_help`` says what it prints); its help names each
    option's default (:class:`DefaultsFormatter`)."""
    p = argparse.ArgumentParser(
        description=(doc or "").split("\n")[0], formatter_class=DefaultsFormatter
    )
    p.add_argument("--json", action="store_true", help=json_help)
    return p


def print_figures(figures: Mapping[str, Any], as_json: bool) -> None:
    """Print ``figures`` as one JSON object when ``as_json``, else one ``name: value`` line
    each, the names right-aligned."""
    if as_json:
        print(json.dumps(figures))
        return
    width = max((len(k) for k in figures), default=0)
    for k, v in figures.items():
        print(f"{k:>{width}}: {v}")
