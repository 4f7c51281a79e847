"""The counts of ``anarchon.testing.scenarios.fault_report`` on records written by hand, and the fence itself.

The scenarios (real processes) are run in each backend's test_*_faults.py; this
checks that the counting tells a zombie from a duplicate, and that the fenced
side-effect file refuses what it must.
"""

from __future__ import annotations

from pathlib import Path

from anarchon.testing.scenarios import fenced_effects
from anarchon.testing.scenarios.fault_report import FaultReport, build_report

SLOT = 1_000_000


def _write(path: Path, *rows: str) -> Path:
    path.write_text("".join(row + "\n" for row in rows))
    return path


def _report(tmp_path: Path, a: list[str], b: list[str], effects: Path | None = None) -> FaultReport:
    outs = [_write(tmp_path / "w0.txt", *a), _write(tmp_path / "w1.txt", *b)]
    url = f"sqlite:///{tmp_path / 'store.db'}"
    return build_report("t", outs, url, "job", (SLOT - 1, SLOT + 1), 1000, effects)


def test_a_completion_after_the_takeover_began_is_a_zombie_not_a_duplicate(
    tmp_path: Path,
) -> None:
    report = _report(
        tmp_path,
        [
            f"begin {SLOT} 1 w0 100",
            f"tick {SLOT} 1 w0 200",
            f"tick {SLOT} 1 w0 3100",
            f"end {SLOT} 1 w0 3150",
        ],
        [f"begin {SLOT} 2 w1 2000", f"tick {SLOT} 2 w1 3000", f"end {SLOT} 2 w1 3300"],
    )
    assert report.zombies == [SLOT]
    assert report.duplicates == {}
    assert report.overlaps == [SLOT]


def test_two_completions_as_owner_are_a_duplicate(tmp_path: Path) -> None:
    report = _report(
        tmp_path,
        [f"begin {SLOT} 1 w0 100", f"end {SLOT} 1 w0 1300"],
        [f"begin {SLOT} 2 w1 3000", f"end {SLOT} 2 w1 4200"],
    )
    assert report.duplicates == {SLOT: 2}
    assert report.zombies == []
    assert report.overlaps == []


def test_the_fence_refuses_a_stale_commit_and_the_log_counts_one_that_slipped(
    tmp_path: Path,
) -> None:
    path = tmp_path / "effects.db"
    conn = fenced_effects.connect(path)
    try:
        assert fenced_effects.register(conn, "job:1", 1, "w0")
        assert fenced_effects.register(conn, "job:1", 2, "w1")
        assert not fenced_effects.register(conn, "job:1", 1, "w0")
        assert not fenced_effects.commit(conn, "job:1", 1, "w0")  # refused: attempt 2 began
        assert fenced_effects.commit(conn, "job:1", 2, "w1")
        # A write that bypassed the fence (what an unfenced handler does) is counted as stale.
        conn.execute("INSERT INTO log VALUES ('commit', 'job:1', 1, 'w0', 99999999999999, '')")
    finally:
        conn.close()
    report = _report(tmp_path, [], [], path)
    assert report.fenced_commits_by_stale == ["job:1#1"]
    kinds = [(e.kind, e.fence) for e in fenced_effects.read_log(path)]
    assert kinds == [("register", 1), ("register", 2), ("commit", 2), ("commit", 1)]


def test_the_fence_refuses_the_same_attempt_with_another_token(tmp_path: Path) -> None:
    """A lossy failover hands the slot out again as attempt 1: the token tells them apart."""
    path = tmp_path / "effects.db"
    conn = fenced_effects.connect(path)
    try:
        assert fenced_effects.register(conn, "job:1", (1, "token-a"), "w0")
        assert fenced_effects.register(conn, "job:1", (1, "token-a"), "w0")  # re-presented
        # The store lost a's claim; b won the slot again, also as attempt 1.
        assert not fenced_effects.register(conn, "job:1", (1, "token-b"), "w1")
        assert not fenced_effects.commit(conn, "job:1", (1, "token-b"), "w1")
        assert fenced_effects.commit(conn, "job:1", (1, "token-a"), "w0")
        # A later attempt still supersedes both.
        assert fenced_effects.register(conn, "job:1", (2, "token-c"), "w1")
        assert not fenced_effects.commit(conn, "job:1", (1, "token-a"), "w0")
        # On another slot, a commit by b that bypassed the fence after a registered is stale.
        assert fenced_effects.register(conn, "job:2", (1, "token-a"), "w0")
        conn.execute(
            "INSERT INTO log VALUES ('commit', 'job:2', 1, 'w1', 99999999999999, 'token-b')"
        )
    finally:
        conn.close()
    report = _report(tmp_path, [], [], path)
    assert report.fenced_commits_by_stale == ["job:2#1"]
    effects = fenced_effects.read_log(path)
    assert [(e.kind, e.fence, e.token) for e in effects if e.run_id == "job:1"] == [
        ("register", 1, "token-a"),
        ("register", 1, "token-a"),
        ("commit", 1, "token-a"),
        ("register", 2, "token-c"),
    ]
