"""The one "this project dir or below" rule (``ctxkeep.paths``): its Python, SQL and
Polars forms agree on every case, and the four places that apply it (purge's SQL
selection, purge's Parquet filter, ingest's project tombstones, search's project
filter) give the same answer (ingest's tombstones: ``tests/maintenance/test_purge.py``,
``test_project_purge_then_ingest_does_not_bring_data_back``)."""

from __future__ import annotations

import sqlite3

import polars as pl
import pytest

from ctxkeep.paths import is_under, normalize_dir, under_expr, under_sql

#: (root, path, expected)
CASES = [
    ("/a/b", "/a/b", True),  # the dir itself
    ("/a/b", "/a/b/c", True),  # below
    ("/a/b", "/a/b/c/d.txt", True),
    ("/a/b", "/a/bc", False),  # a sibling sharing the prefix
    ("/a/b", "/a/b0", False),  # '0' sorts right after '/': the range's upper bound
    ("/a/b", "/a/b.git", False),  # '.' sorts right before '/'
    ("/a/b", "/a", False),  # above
    ("/a/b", "/a/c", False),
    ("/a/b", "/A/b/c", False),  # case-sensitive
    ("/a/b/", "/a/b", True),  # a trailing separator on the root is ignored
    ("/a/b/", "/a/b/c", True),
    ("/a/b/", "/a/bc", False),
    ("/a/b", "/a/b\\c", True),  # a Windows separator below a dir
    ("/", "/x/y", True),  # the filesystem root holds every absolute path
    ("/", "/", True),
    ("/", "relative/x", False),
    ("C:\\Users\\x", "C:\\Users\\x\\repo", True),  # Windows paths
    ("C:\\Users\\x", "C:\\Users\\x", True),
    ("C:\\Users\\x", "C:\\Users\\xy", False),
    ("C:\\Users\\x\\", "C:\\Users\\x\\repo", True),
    ("C:\\Users\\x", "C:/Users/x/repo", False),  # the text as recorded: no separator folding
    ("C:\\", "C:\\repo", True),  # a drive root
    ("C:\\", "C:/repo", True),
    ("C:\\", "D:\\repo", False),
    ("C:\\", "C:", True),
    ("/a_b", "/a_b/c", True),  # LIKE wildcards are plain characters here
    ("/a_b", "/axb/c", False),
    ("/a%", "/abc/d", False),
    ("/ü/日本", "/ü/日本/x", True),  # non-ASCII
    ("/ü/日本", "/ü/日本x", False),
]


def _sql(root: str, paths: list[str | None]) -> list[bool | None]:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t(i INTEGER, project_dir TEXT)")
    conn.executemany("INSERT INTO t VALUES(?, ?)", list(enumerate(paths)))
    clause, params = under_sql("t.project_dir", root)
    got = [
        None if v is None else bool(v)
        for _, v in conn.execute(f"SELECT i, {clause} FROM t ORDER BY i", params)
    ]
    conn.close()
    return got


@pytest.mark.parametrize("root,path,want", CASES)
def test_python_sql_and_polars_forms_agree(root, path, want):
    assert is_under(path, root) is want
    assert _sql(root, [path]) == [want]
    got = pl.DataFrame({"project_dir": [path]}).select(under_expr(pl.col("project_dir"), root))
    assert got.to_series().to_list() == [want]


def test_null_paths_are_not_under_anything():
    assert is_under(None, "/a") is False
    assert _sql("/a", [None, "/a/x"]) == [None, True]  # NULL in SQL, as the column
    s = pl.DataFrame({"p": [None, "/a/x"]}, schema={"p": pl.String}).select(under_expr(pl.col("p"), "/a"))
    assert s.to_series().to_list() == [None, True]


def test_sql_params_are_positional_and_in_order():
    clause, params = under_sql("e.project_dir", "/a/b")
    assert clause.count("?") == len(params) == 5
    assert params == ["/a/b", "/a/b/", "/a/b0", "/a/b\\", "/a/b]"]
    assert under_sql("project_dir", "/") == ("((project_dir >= ? AND project_dir < ?))", ["/", "0"])


def test_an_empty_root_is_refused():
    for f in (lambda: is_under("/a", ""), lambda: under_sql("c", ""), lambda: under_expr(pl.col("c"), "")):
        with pytest.raises(ValueError, match="project directory is required"):
            f()


def test_sql_form_can_use_an_index():
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t(project_dir TEXT)")
    conn.execute("CREATE INDEX t_dir ON t(project_dir)")
    clause, params = under_sql("project_dir", "/a/b")
    plan = " ".join(r[-1] for r in conn.execute(f"EXPLAIN QUERY PLAN SELECT * FROM t WHERE {clause}", params))
    assert "t_dir" in plan and "SCAN t" not in plan.replace("SCAN t_dir", "")


def test_normalize_dir():
    assert normalize_dir("~/x/", "/cwd") == normalize_dir("~/x", "/cwd")
    assert normalize_dir("sub/../y/", "/cwd") == "/cwd/y"
    assert normalize_dir("/", "/cwd") == "/"
    assert normalize_dir("C:\\Users\\x\\", "/cwd") == "C:\\Users\\x"


# ---------------------------------------------------------------- the four users of the rule


def test_the_users_of_the_rule_agree(store_home):
    """purge's SQL selection, purge's archive filter and the search project filter
    choose the same rows of one table of project dirs."""
    from ctxkeep.query.search import Filters
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sinks.sqlite import delete as delete_store

    root = "/w/proj"
    dirs = [
        "/w/proj",
        "/w/proj/sub",
        "/w/proj\\win",
        "/w/projx",
        "/w/pro",
        "/w",
        "/W/proj/sub",
        "/w/proj_",
        "/w/proj0/a",
    ]
    want = {d for d in dirs if is_under(d, root)}
    assert want == {"/w/proj", "/w/proj/sub", "/w/proj\\win"}

    conn = sqlite_store.connect(store_home)
    with sqlite_store.write(conn):
        conn.executemany(
            "INSERT INTO entries(entry_id, agent, session_id, project_dir, kind, role, "
            "status, source_path, source_offset) VALUES(?, 'codex', ?, ?, 'message', 'user', "
            "'active', 'f', ?)",
            [(d, f"s{i}", d, i) for i, d in enumerate(dirs)],
        )
    # purge: the SQL selection
    delete_store.select_project(conn, root)
    picked = {r[0] for r in conn.execute("SELECT entry_id FROM _p_entries")}
    delete_store.drop_selection(conn)
    assert picked == want
    # search: the exact project filter
    where, params = Filters(project=root).sql("e")
    # (a fragment over entry_rows, v10: the project dir by its id)
    pick = "SELECT p.project_dir FROM entry_rows e JOIN projects p USING (project_id) WHERE "
    assert {r[0] for r in conn.execute(pick + where, params)} == want
    assert {
        r[0]
        for r in conn.execute(
            pick + Filters(project=root + "/").sql("e")[0],
            Filters(project=root + "/").sql("e")[1],
        )
    } == want
    conn.close()
    # purge: the Parquet archive filter
    frame = pl.DataFrame(
        {
            "project_dir": dirs,
            "session_id": [f"s{i}" for i in range(len(dirs))],
            "parent_session_id": [None] * len(dirs),
        },
        schema_overrides={"parent_session_id": pl.String},
    )
    from ctxkeep.sinks.parquet import scope_filter

    pick = scope_filter("project", root, set())
    assert set(frame.filter(pick(frame))["project_dir"]) == want
