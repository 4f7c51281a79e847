"""The ``durability`` setting of the lease backends, checked the same way by each (docs/durability.md).

``"fast"`` (the default): a write is acknowledged by the primary or leader; a
failover can lose it. ``"replicated"``: a claim, a heartbeat that extends a
lease and a finish are confirmed only once the store says they are on its
replicas; a claim it cannot confirm is answered ``uncertain``. A store
without replicas (SQLite, memory) accepts ``"fast"`` only.
"""

from __future__ import annotations

from anarchon.errors import InvalidConfigError

__all__ = ["DURABILITY", "check_durability", "check_single_node_durability"]

DURABILITY = ("fast", "replicated")
"""The values of the ``durability`` setting."""


def check_durability(value: object) -> str:
    """``value`` if it is one of :data:`DURABILITY`; else ``InvalidConfigError`` naming it."""
    if isinstance(value, str) and value in DURABILITY:
        return value
    accepted = ", ".join(repr(v) for v in DURABILITY)
    raise InvalidConfigError(f"durability must be one of {accepted}, got {value!r}")


def check_single_node_durability(store: str, value: object) -> str:
    """Accept ``durability="fast"`` only: a store without replicas cannot confirm ``replicated``.

    Raises ``InvalidConfigError`` naming the value and what is accepted.
    """
    if check_durability(value) == "replicated":
        raise InvalidConfigError(
            f"{store} has no replica to confirm a write on: durability='replicated' cannot"
            " hold here; use durability='fast' (the default) or a replicated store"
            " (docs/durability.md)"
        )
    return "fast"
