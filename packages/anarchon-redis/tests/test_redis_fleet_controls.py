"""Job controls stored by older versions still load on Redis.

(The two-process CLI scenario, ``ControlScenarios``, runs in test_redis_contracts.py.)
"""

from __future__ import annotations

import pytest


def test_a_control_stored_before_paused_at_and_resumed_at_still_loads() -> None:
    from anarchon.backend.foreign import stored_data
    from anarchon.errors import ForeignDataError
    from anarchon_redis._fleet import control_of

    old = control_of("j", '{"p":1,"u":null,"at":1700000000000,"by":"cli"}')
    assert (old.paused, old.updated_at, old.updated_by) == (True, 1_700_000_000_000, "cli")
    assert (old.paused_at, old.resumed_at) == (None, None)
    new = control_of("j", '{"p":0,"u":5,"at":6,"by":null,"pa":2,"ra":3}')
    assert (new.skip_until, new.paused_at, new.resumed_at) == (5, 2, 3)
    for bad in ('{"p":0,"u":5,"at":6,"by":null,"pa":"x"}', '{"p":0,"u":1e400,"at":6,"by":null}'):
        with pytest.raises(ForeignDataError) as info, stored_data("k[j]", "a control"):
            control_of("j", bad)
        assert info.value.key == "k[j]"
