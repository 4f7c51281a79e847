"""A stored result as JSON text, for stores that keep results as JSON (docs/extending.md).

:func:`result_json` writes exactly what
``json.dumps(fields, separators=(",", ":"), sort_keys=True)`` writes for a
:class:`~anarchon.types.StoredResult`'s ten fields, so a retried write stores
the same text again. The Rust core writes it (once per job-slot, on the hot
path); a field the core does not take (a string that is not a ``str`` or
holds a lone surrogate, an int beyond 64 bits) goes through :mod:`json`.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from anarchon import _core
from anarchon.types import StoredResult

__all__ = ["result_fields", "result_json"]


def result_fields(result: StoredResult) -> dict[str, Any]:
    """The fields of ``result`` by name, as :func:`result_json` writes them."""
    return {**dataclasses.asdict(result), "manual": bool(result.manual)}


def result_json(result: StoredResult) -> str:
    """``result`` as compact JSON with sorted keys (see the module's docstring)."""
    text = _core.result_json(result)
    if text is None:
        text = json.dumps(result_fields(result), separators=(",", ":"), sort_keys=True)
    return text
