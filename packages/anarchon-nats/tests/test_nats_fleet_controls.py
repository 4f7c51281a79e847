"""Job controls stored by older versions still load on NATS.

(The two-process CLI scenario, ``ControlScenarios``, runs in test_nats_contract.py.)
"""

from __future__ import annotations

import pytest


def test_a_control_stored_before_paused_at_and_resumed_at_still_loads() -> None:
    from anarchon.errors import ForeignDataError
    from anarchon.fleet.types import JobControl
    from anarchon_nats._fleet import control_of, control_payload

    old = control_of("s", "subj", b'{"job":"j","p":1,"u":null,"by":"cli"}', 7)
    assert (old.paused, old.updated_at, old.paused_at, old.resumed_at) == (True, 7, None, None)
    stored = JobControl("j", paused_at=2, resumed_at=3)
    new = control_of("s", "subj", control_payload(stored), 9)
    assert (new.paused_at, new.resumed_at, new.updated_at) == (2, 3, 9)
    with pytest.raises(ForeignDataError):
        control_of("s", "subj", b'{"job":"j","p":0,"u":null,"by":null,"ra":"x"}', 7)
