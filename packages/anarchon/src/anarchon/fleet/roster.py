"""The roster digest of a membership record (docs/scaling.md, "Candidates").

Instances rank each other for a job only when their rosters are equal: the
same ``candidates`` count and the same jobs with the same fingerprints. The
digest is ``k<K>-<32 hex>``, so a reader (``anarchon status``) can tell the
count from the record.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from anarchon import _core
from anarchon.fleet.types import Member

__all__ = ["candidates_of", "roster_k", "roster_of"]


def roster_of(k: int, prints: Iterable[tuple[str, str]]) -> str:
    """The roster digest: ``k`` and every (job, fingerprint) pair, in any order."""
    digest = hashlib.sha256()
    for name, print_ in sorted(prints):
        digest.update(name.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
        digest.update(print_.encode())
        digest.update(b"\n")
    return f"k{k}-{digest.hexdigest()[:32]}"


def roster_k(roster: str) -> int | None:
    """The candidates count a roster digest carries, or None if it is not one of ours."""
    head, sep, _ = roster.partition("-")
    if not sep or not head.startswith("k") or not head[1:].isdigit():
        return None
    k = int(head[1:])
    return k if 1 <= k <= 1024 else None


def candidates_of(job: str, members: Iterable[Member], declaring: Iterable[str]) -> list[str]:
    """The candidates of ``job``: in each roster group holding one of the ``declaring``
    instances, its first ``k`` by rank (groups in the order of their first member)."""
    wanted = set(declaring)
    groups: dict[str, list[str]] = {}
    for member in members:
        groups.setdefault(member.roster, []).append(member.instance_id)
    chosen: list[str] = []
    for roster, ids in sorted(groups.items(), key=lambda item: min(item[1])):
        k = roster_k(roster)
        if k is None or not wanted.intersection(ids):
            continue
        chosen.extend(_core.rendezvous_candidates(sorted(ids), job, k))
    return chosen
