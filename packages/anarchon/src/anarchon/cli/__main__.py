"""``python -m anarchon.cli``: the ``anarchon`` command."""

from __future__ import annotations

from anarchon.cli.commands import main

raise SystemExit(main())
