"""Job names: 1-200 characters, no whitespace, no ``{ } |``, no control characters.

Control characters are C0 (U+0000-U+001F), DEL (U+007F) and C1
(U+0080-U+009F): ``'a\\x9bb'`` holds CSI, which some terminals read as the
start of an escape sequence, so such a name could rewrite a log line.
"""

from __future__ import annotations

import pytest
from anarchon import InvalidJobError
from anarchon.jobs import validate_name

CONTROLS = [chr(c) for c in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]]


@pytest.mark.parametrize("char", CONTROLS, ids=[f"U+{ord(c):04X}" for c in CONTROLS])
def test_control_characters_are_refused_where_they_are(char: str) -> None:
    name = f"ab{char}c"
    with pytest.raises(InvalidJobError) as info:
        validate_name(name)
    assert info.value.code == "ANARCHON_INVALID_JOB"
    assert info.value.position == 2
    # The message shows the character escaped, never raw.
    assert char not in info.value.message
    assert repr(char) in info.value.message


def test_the_c1_name_of_the_issue() -> None:
    with pytest.raises(InvalidJobError, match=r"'\\x9b' at position 1"):
        validate_name("a\x9bb")


@pytest.mark.parametrize("name", ["a b", "a\u00a0b", "a\u2028b", "a{b", "a|b", "", "x" * 201])
def test_other_bad_names(name: str) -> None:
    with pytest.raises(InvalidJobError):
        validate_name(name)


@pytest.mark.parametrize(
    "name", ["billing.nightly", "été", "job-1_2:3", "\u00a1hola", "x" * 200, "数据同步"]
)
def test_good_names(name: str) -> None:
    assert validate_name(name) == name
