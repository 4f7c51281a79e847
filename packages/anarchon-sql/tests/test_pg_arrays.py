"""Array parameters sent as literals (anarchon_sql.postgres._arrays): PostgreSQL reads the values psycopg would send."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
from anarchon_sql.postgres._arrays import array_literal
from hypothesis import given, settings
from hypothesis import strategies as st

# PostgreSQL text cannot hold NUL; everything else (quotes, backslashes, braces, commas,
# blanks, "NULL", non-ASCII) must come back as it went.
_TEXT = st.text(st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), max_size=12)
_INT = st.integers(min_value=-(2**63), max_value=2**63 - 1)

_ARRAYS: list[tuple[str, Any]] = [
    ("TEXT[]", st.lists(_TEXT, max_size=8)),
    ("TEXT[]", st.lists(st.none() | _TEXT, max_size=8)),
    ("TEXT[]", st.lists(st.sampled_from(["ok", "NULL", "", " ", "a,b", "{x}", 'q"', "b\\"]))),
    ("BIGINT[]", st.lists(_INT, max_size=8)),
    ("BIGINT[]", st.lists(st.none() | _INT, max_size=8)),
    ("BOOLEAN[]", st.lists(st.booleans(), max_size=8)),
    ("BOOLEAN[]", st.lists(st.none() | st.booleans(), max_size=8)),
]


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_literal_means_what_the_list_means(pg_dsn: str, data: st.DataObject) -> None:
    sql_type, values = data.draw(
        st.sampled_from(_ARRAYS).flatmap(lambda a: st.tuples(st.just(a[0]), a[1]))
    )

    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            sent_as_list = await (
                await conn.execute(f"SELECT CAST(%s AS {sql_type})", (values,))
            ).fetchone()
            sent_as_literal = await (
                await conn.execute(f"SELECT CAST(%s AS {sql_type})", (array_literal(values),))
            ).fetchone()
        assert sent_as_literal == sent_as_list
        assert sent_as_literal is not None
        assert sent_as_literal[0] == values

    asyncio.run(main())


def test_the_fast_paths_and_the_general_one() -> None:
    assert array_literal([]) == "{}"
    assert array_literal([1, -2, 3]) == "{1,-2,3}"
    assert array_literal(["a", "b c"]) == '{"a","b c"}'
    assert array_literal(['a"b', "c\\d"]) == '{"a\\"b","c\\\\d"}'
    assert array_literal([None, "x"]) == '{NULL,"x"}'
    assert array_literal([True, False, None]) == "{t,f,NULL}"
    assert array_literal([None, 5]) == "{NULL,5}"
