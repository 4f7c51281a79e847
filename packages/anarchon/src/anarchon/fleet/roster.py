"""The roster digest of a membership record (docs/scaling.md, "Candidates").

Instances rank each other for a job only when their rosters are equal: the
same ``candidates`` count and the same jobs with the same fingerprints. The
digest is ``k<K>-<32 hex>``, so a reader (``anarchon status``) can tell the
count from the record.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

from anarchon import _core
from anarchon.fleet.types import Member

__all__ = ["candidates_by_job", "candidates_of", "roster_k", "roster_label", "roster_of"]


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


def roster_label(roster: str) -> str:
    """A short label of a roster digest for display: ``k2-1a2b3c4d`` (members with
    equal labels are, in all likelihood, ranked together)."""
    if roster_k(roster) is None:
        return roster[:12] or "-"
    head, _, digest = roster.partition("-")
    return f"{head}-{digest[:8]}"


def candidates_of(job: str, members: Iterable[Member], declaring: Iterable[str]) -> list[str]:
    """The candidates of ``job``: in each roster group holding one of the ``declaring``
    instances, its first ``k`` by rank (groups in the order of their first member)."""
    return candidates_by_job(members, {job: declaring})[job]


def candidates_by_job(
    members: Iterable[Member], declaring: Mapping[str, Iterable[str]]
) -> dict[str, list[str]]:
    """:func:`candidates_of` of every job of ``declaring`` (job -> the instances declaring
    it), grouping the members once: one rendezvous ranking per job and group."""
    groups: dict[str, list[str]] = {}
    for member in members:
        groups.setdefault(member.roster, []).append(member.instance_id)
    ranked: list[tuple[int, list[str]]] = []
    group_of: dict[str, int] = {}
    for roster, ids in sorted(groups.items(), key=lambda item: min(item[1])):
        k = roster_k(roster)
        if k is None:
            continue
        for instance_id in ids:
            group_of[instance_id] = len(ranked)
        ranked.append((k, sorted(ids)))
    chosen: dict[str, list[str]] = {}
    for job, instances in declaring.items():
        found = sorted({group_of[i] for i in instances if i in group_of})
        chosen[job] = [
            name
            for index in found
            for name in _core.rendezvous_candidates(ranked[index][1], job, ranked[index][0])
        ]
    return chosen
