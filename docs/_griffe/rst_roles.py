"""A griffe extension for the API reference: Sphinx roles in docstrings become inline code.

The docstrings use reStructuredText roles (``:class:`~anarchon.types.RunRecord```,
``:meth:`start```) that Markdown would show verbatim. This turns each into inline
code, keeping only the last part of the name when the target starts with ``~``
(as Sphinx shows it). Loaded by ``mkdocs.yml`` (``extensions:``); not part of
any package.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|mod|exc|data|obj|const):`([^`]+)`")


def _shown(match: re.Match[str]) -> str:
    target = match.group(1).strip()
    label = re.match(r"^(.*?)\s*<[^>]+>$", target)  # :role:`text <target>`
    if label:
        return f"`{label.group(1)}`"
    if target.startswith("~"):
        target = target[1:].rsplit(".", 1)[-1]
    return f"`{target}`"


def plain_roles(text: str) -> str:
    """``text`` with every Sphinx cross-reference role replaced by inline code."""
    return _ROLE.sub(_shown, text)


class RstRoles(griffe.Extension):
    """Rewrite the roles of every docstring once the object tree is built."""

    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        """Rewrite ``obj``'s docstring in place."""
        if obj.docstring is not None:
            obj.docstring.value = plain_roles(obj.docstring.value)
