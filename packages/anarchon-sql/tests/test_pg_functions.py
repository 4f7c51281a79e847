"""The PL/pgSQL templates (anarchon_sql/postgres/sql/*.sql) load and fill in completely."""

from __future__ import annotations

import re
from collections.abc import Callable
from importlib import resources

import pytest
from anarchon_sql import SqlTables
from anarchon_sql.postgres import _functions as functions
from anarchon_sql.postgres._functions import sql_template

BUILDERS = (
    functions.claim_function,
    functions.claim_many_function,
    functions.heartbeat_many_function,
    functions.finish_many_function,
    functions.save_many_function,
    functions.finish_save_many_function,
)


def test_every_template_file_loads_without_its_final_newline() -> None:
    folder = resources.files("anarchon_sql.postgres").joinpath("sql")
    names = sorted(p.name.removesuffix(".sql") for p in folder.iterdir() if p.name.endswith(".sql"))
    assert names, "no templates packaged"
    for name in names:
        text = sql_template(name)
        assert text, name
        assert not text.endswith("\n"), name


@pytest.mark.parametrize("build", BUILDERS, ids=lambda b: b.__name__)
def test_a_function_is_filled_in_for_its_prefix(build: Callable[..., str]) -> None:
    sql = build(SqlTables("pfx_"), "NOW()")
    assert sql.startswith("\nCREATE OR REPLACE FUNCTION pfx_")
    assert sql.count("$anarchon$") == 2
    assert not re.search(r"\{\w+\}", sql), "a placeholder was left unfilled"
    assert "anarchon_" not in sql.replace("$anarchon$", "")
