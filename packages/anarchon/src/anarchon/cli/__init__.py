"""The ``anarchon`` command line (docs/cli.md): the commands, the fleet commands and the demo."""

from __future__ import annotations

from anarchon.cli.commands import build_parser, main

__all__ = ["build_parser", "main"]
