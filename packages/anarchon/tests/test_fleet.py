"""The fleet harness ``anarchon.testing.fleet``: its checks on synthetic records, and a real run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from anarchon.testing import FleetResult, FleetRun, run_fleet
from anarchon.testing.fleet import main, parse_records
from anarchon.testing.fleet._worker import _key_value
from anarchon.types import RunRecord

EVERY = 200
WINDOW = list(range(1600, 4400 + 1, EVERY))
"""The window of ``_result``: starts up to 1100 and stops from 5000, 3 slots in from each end."""


def _files(tmp_path: Path, runs: dict[str, list[int]]) -> list[Path]:
    """One record file per instance, with the runs given and start/stop around 1000..5100."""
    paths = []
    for i, (instance, slots) in enumerate(sorted(runs.items())):
        path = tmp_path / f"{instance}.txt"
        lines = [f"start {1000 + 100 * i}"]
        lines += [f"run {slot} 1 {instance}" for slot in slots]
        lines.append(f"stop {5000 + 100 * i}")
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    return paths


def _result(tmp_path: Path, runs: dict[str, list[int]]) -> FleetResult:
    result = FleetResult(
        job="synthetic",
        processes=len(runs),
        every_ms=EVERY,
        window_s=2.0,
        returncodes=[0] * len(runs),
        stderr=[""] * len(runs),
    )
    return parse_records(_files(tmp_path, runs), result)


def _history(result: FleetResult) -> list[RunRecord]:
    return [RunRecord("synthetic", r.slot, r.instance, "ok") for r in result.runs]


def test_a_clean_fleet_passes(tmp_path: Path) -> None:
    # Runs before and after the window (processes starting and stopping) do not count.
    result = _result(tmp_path, {"a": [800, *WINDOW[::2], 5000], "b": WINDOW[1::2]})
    assert result.window == WINDOW
    assert result.common_s == pytest.approx(2.8)
    result.history = _history(result)
    assert result.problems() == []
    result.assert_exactly_once()
    assert "15 slots in 2.8 s" in result.summary()


def test_a_duplicate_and_a_missed_slot_are_reported(tmp_path: Path) -> None:
    a = [slot for slot in WINDOW[::2] if slot != 2400]  # 2400 never runs
    b = [*WINDOW[1::2], 3200]  # 3200 runs on a and b
    result = _result(tmp_path, {"a": a, "b": b})
    assert result.duplicates() == {3200: 2}
    assert result.missed() == [2400]
    with pytest.raises(AssertionError) as raised:
        result.assert_exactly_once()
    message = str(raised.value)
    assert "1 slots ran more than once: 3200 x2" in message
    assert "1 of 15 slots never ran: [2400]" in message


def test_history_that_disagrees_is_reported(tmp_path: Path) -> None:
    result = _result(tmp_path, {"a": WINDOW[::2], "b": WINDOW[1::2]})
    history = _history(result)
    history = [r for r in history if r.slot != 2000]  # lost
    history.append(RunRecord("synthetic", 2800, "a", "ok"))  # 2800 ran on a, recorded twice
    history.append(RunRecord("synthetic", 2400, "b", "error"))  # 2400 ran on a: twice, wrong
    result.history = history
    problems = "\n".join(result.problems())
    assert "history lacks 1 slots of the window: [2000]" in problems
    assert "history has 2 slots more than once: {2400: 2, 2800: 2}" in problems
    assert "did not end ok" in problems
    assert "(2400, 'b', 'a')" in problems


def test_one_winner_a_short_window_and_retries_are_reported(tmp_path: Path) -> None:
    result = _result(tmp_path, {"a": WINDOW, "b": []})
    result.runs.append(FleetRun(3200, 2, "a"))
    problems = "\n".join(result.problems(min_window_s=10.0))
    assert "only ['a'] won slots of the window" in problems
    assert "ran together for only 2.8 s (< 10.0 s)" in problems
    assert "1 runs were not a first attempt: [FleetRun(slot=3200" in problems


def test_a_second_attempt_after_the_window_is_a_hand_over_not_a_problem(tmp_path: Path) -> None:
    # A stopping process hands over what it claimed ahead; a later-stopping one runs it again.
    result = _result(tmp_path, {"a": WINDOW[::2], "b": WINDOW[1::2]})
    result.runs.append(FleetRun(5000, 2, "b"))
    assert result.problems() == []
    result.history = _history(result)  # the store has no hand-over of attempt 1: reported
    assert result.problems() == [
        "1 runs outside the window were not a first attempt and the history has no hand-over"
        " of the attempt before: [FleetRun(slot=5000, attempt=2, instance='b',"
        " started_ms=None, job=None)]"
    ]
    result.history.append(RunRecord("synthetic", 5000, "a", "interrupted", "handed_over"))
    assert result.problems() == []
    inside = _result(tmp_path, {"a": WINDOW[:-1:2], "b": WINDOW[1::2]})
    inside.runs.append(FleetRun(WINDOW[-1], 2, "b"))
    assert inside.problems() == [
        f"1 runs were not a first attempt: [FleetRun(slot={WINDOW[-1]}, attempt=2,"
        " instance='b', started_ms=None, job=None)]"
    ]


def test_a_crashed_or_silent_process_fails_first(tmp_path: Path) -> None:
    result = _result(tmp_path, {"a": WINDOW, "b": []})
    result.returncodes = [0, 1]
    result.stderr = ["", "Traceback ...\nBoom"]
    assert result.problems() == ["process 1 exited with 1:\nTraceback ...\nBoom"]
    result.returncodes = [0, 0]
    (tmp_path / "b.txt").write_text("start 1100\n")
    silent = FleetResult("synthetic", 2, EVERY, 2.0, returncodes=[0, 0], stderr=["", ""])
    parse_records([tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "none.txt"], silent)
    assert silent.problems() == ["1 of 2 processes wrote 'stop'"]


def test_a_line_that_is_no_record_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_text("start 1\nrun 200 one a\n")
    with pytest.raises(ValueError, match=r"bad.txt:2: not a fleet record"):
        parse_records([path], FleetResult("j", 1, EVERY, 1.0))


def test_worker_options_parse_as_json_or_text() -> None:
    assert _key_value("overlap=true") == ("overlap", True)
    assert _key_value("max_attempts=3") == ("max_attempts", 3)
    assert _key_value("lease=5s") == ("lease", "5s")
    with pytest.raises(SystemExit):
        main(["worker", "--instance", "x"])  # no backend, job, until or out


@pytest.mark.slow
def test_three_processes_on_sqlite(tmp_path: Path) -> None:
    """The harness for real: 3 processes on one SQLite file, 3 s together, history agrees."""
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    result = run_fleet(
        url,
        tmp_path=tmp_path / "fleet",
        processes=3,
        window_s=3.0,
        startup_s=4.0,
        reader=url,
        scheduler_options={"lease": "5s", "heartbeat": "1s"},
        job_options={"overlap": True},
    )
    assert result.returncodes == [0, 0, 0]
    assert len(result.window) >= 3000 // EVERY
    assert result.history is not None
    print(result.summary(), file=sys.stderr)


@pytest.mark.slow
def test_a_store_that_does_not_share_claims_fails(tmp_path: Path) -> None:
    """``memory://`` in separate processes is separate stores: every slot runs on each."""
    result = run_fleet(
        "memory://", tmp_path=tmp_path, processes=2, window_s=1.0, startup_s=2.0, check=False
    )
    assert set(result.duplicates().values()) == {2}
    assert len(result.duplicates()) == len(result.window)
    with pytest.raises(AssertionError, match="slots ran more than once"):
        result.assert_exactly_once()


def test_runs_of_several_jobs_with_start_times_are_checked_per_job(tmp_path: Path) -> None:
    """Six-field run lines (``started_ms`` and ``job``): each job checked, early runs listed."""
    path = tmp_path / "a.txt"
    lines = ["start 1000"]
    lines += [f"run {slot} 1 a {slot + 3} j-0" for slot in WINDOW]
    lines += [f"run {slot} 1 a {slot} j-1" for slot in WINDOW if slot != 2000]
    lines += ["run 2200 1 a 2150 j-1", "stop 5000"]
    path.write_text("\n".join(lines) + "\n")
    result = FleetResult("j", 1, EVERY, 2.0, returncodes=[0], stderr=[""], jobs=["j-0", "j-1"])
    parse_records([path], result)
    assert result.runs[0] == FleetRun(WINDOW[0], 1, "a", WINDOW[0] + 3, "j-0")
    assert result.duplicates("j-0") == {}
    assert result.missed("j-0") == []
    assert result.duplicates("j-1") == {2200: 2}
    assert result.missed("j-1") == [2000]
    assert result.early() == [FleetRun(2200, 1, "a", 2150, "j-1")]
    assert result.early(tolerance_ms=50) == []
    problems = result.problems(min_instances=1)
    assert any(p.startswith("job j-1: 1 slots ran more than once") for p in problems)
    assert any(p.startswith("job j-1: 1 of") for p in problems)
    assert not any("j-0" in p for p in problems)
