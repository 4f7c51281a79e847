"""Start example programs as real processes and read their output lines (framework example tests)."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path


class Process:
    """A child process whose stdout+stderr lines are collected by a reader thread."""

    def __init__(self, args: Sequence[str], cwd: Path, env: Mapping[str, str]) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        self.proc = subprocess.Popen(
            [sys.executable, *args],
            cwd=cwd,
            env={**os.environ, **env, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, match: Callable[[str], bool], timeout: float, what: str) -> str:
        """The first line (old or new) that ``match`` accepts; fails with the output so far."""
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            lines = list(self.lines)
            for line in lines[seen:]:
                if match(line):
                    return line
            seen = len(lines)
            if self.proc.poll() is not None and seen == len(self.lines):
                break
            time.sleep(0.05)
        raise AssertionError(f"no line for {what} within {timeout} s; output:\n" + self.output())

    def output(self) -> str:
        """Everything printed so far."""
        return "\n".join(self.lines)

    def stop(self, timeout: float = 20) -> int:
        """SIGTERM, then wait (SIGKILL after ``timeout``); the exit code."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode
