"""The ``ctxkeep ingest`` command (in-process, ``--no-prefect``; the Prefect path is
covered by test_ingest_flow.py), and the choice between an in-process run and a
Prefect flow run (``flows.prefect_env.run_as_flow``) that ingest and the maintenance
commands make."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from conftest import CORPUS_HOME
from ctxkeep.cli import app


def _run(args, monkeypatch, home=CORPUS_HOME):
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    return CliRunner().invoke(app, args)


CC = ["--agent", "claude-code", "--agent", "codex"]  # the figures below are of these two agents


def test_ingest_json_then_noop(store_home, monkeypatch):
    r = _run(["ingest", "--home", str(store_home), "--no-prefect", "--json", *CC], monkeypatch)
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    # 16 transcripts and the sub-agent's 152-byte .meta.json (a sidecar: its bytes count)
    assert (s["files"], s["files_read"], s["entries_new"], s["bytes"], s["quarantined"]) == (
        17,
        17,
        3215,
        6439453 + 152,
        0,
    )
    r2 = _run(["ingest", "--home", str(store_home), "--no-prefect", "--json", *CC], monkeypatch)
    s2 = json.loads(r2.stdout)
    assert (s2["files"], s2["files_read"], s2["entries_new"], s2["bytes"]) == (17, 0, 0, 0)


def test_ingest_summary_line(store_home, monkeypatch):
    r = _run(
        ["ingest", "--home", str(store_home), "--no-prefect", "--no-progress", "--agent", "codex"],
        monkeypatch,
    )
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("ingested 2,229 new entries from 6 of 6 files (")
    assert "; 0 bad lines\n" in r.stdout


def test_ingest_unknown_agent_is_one_line(store_home, monkeypatch):
    r = _run(["ingest", "--home", str(store_home), "--agent", "cursorx"], monkeypatch)
    assert r.exit_code == 2
    from ctxkeep.sources import SOURCES

    assert r.output.strip().splitlines() == [
        "error: unknown agent 'cursorx' (--agent) - did you mean 'cursor'?"
    ]
    assert "cursor" in SOURCES


def test_ingest_explicit_path(store_home, monkeypatch, tmp_path):
    src = (
        CORPUS_HOME
        / ".codex/sessions/2025/10/31/rollout-2025-10-31T18-36-16-fa1ac8bf-348e-4b9a-a06d-767050fa1e10.jsonl"
    )
    r = _run(
        [
            "ingest",
            "--home",
            str(store_home),
            "--no-prefect",
            "--json",
            "--path",
            str(src),
            "--path",
            str(tmp_path / "missing.jsonl"),
        ],
        monkeypatch,
        home=tmp_path,
    )
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert (s["files"], s["entries_new"]) == (1, 2)
    assert s["problems"] == [f"{tmp_path / 'missing.jsonl'}: no such file or directory"]


def _ingest_in_a_process(
    user_home, store_home, *args: str, watch=("prefect", "duckdb", "polars"), as_json: bool = True
):
    """``ctxkeep ingest --home STORE [--json] ARGS`` as a whole process with ``HOME`` =
    ``user_home`` and no ``PREFECT_*`` settings: (its summary - parsed JSON, or the
    printed lines without ``as_json`` -, which of ``watch`` it imported)."""
    import os
    import subprocess
    import sys

    from conftest import ROOT

    # the modules are printed by an atexit handler: a first ingest and a few new lines'
    # (``--path``) end with ``prestart.exit_now`` (atexit handlers, then ``os._exit``),
    # so nothing after ``run_module`` would run
    code = (
        "import atexit, sys, runpy; sys.argv = ['ctxkeep', 'ingest', '--home', *sys.argv[1:]]\n"
        f"atexit.register(lambda: print(sorted(m for m in {tuple(watch)!r} if m in sys.modules), flush=True))\n"
        "runpy.run_module('ctxkeep', run_name='__main__')\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["HOME"] = str(user_home)
    r = subprocess.run(
        [sys.executable, "-c", code, str(store_home), *(["--json"] if as_json else []), *args],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    summary = json.loads("\n".join(lines[:-1])) if as_json else lines[:-1]
    return summary, json.loads(lines[-1].replace("'", '"'))


def test_noop_ingest_imports_neither_prefect_nor_duckdb_nor_polars(store_home, tmp_path):
    """A no-op re-ingest must stay cheap as a whole process (issue 14: ≤ 0.3 s on the
    corpus): nothing changed → no Prefect, no DuckDB, not even the engine's Polars."""
    empty_home = tmp_path / "user"
    empty_home.mkdir()
    summary, imported = _ingest_in_a_process(empty_home, store_home)
    assert imported == [] and summary["files"] == 0


def test_noop_ingest_summary_imports_no_rich(store_home, tmp_path):
    """The printed summary of a run that stored nothing needs no Rich (~40 ms of a
    no-op's 0.3 s): plain lines, as written."""
    (tmp_path / "user").mkdir()
    lines, imported = _ingest_in_a_process(tmp_path / "user", store_home, watch=("rich",), as_json=False)
    assert lines[0].startswith("ingested 0 new entries from 0 of 0 files (0 B, 0 records) in ")
    assert "no session files found: `ctxkeep sources`" in lines[1]
    assert imported == []


def test_an_unknown_agent_in_config_is_warned_about(tmp_path):
    home = tmp_path / "h"
    home.mkdir()
    (home / "config.toml").write_text("[agents.codx]\nenabled = true\n")
    (tmp_path / "empty").mkdir()
    r = CliRunner().invoke(
        app, ["ingest", "--home", str(home), "--path", str(tmp_path / "empty"), "--no-prefect"]
    )
    # an empty folder holds no session file: one error line, rc 1 (test_cli_new_user)
    assert r.exit_code == 1
    assert "config.toml names agent 'codx', which ctxkeep has no source for" in r.stderr


def test_ingest_of_paths_that_do_not_exist_fails(tmp_path):
    r = CliRunner().invoke(
        app, ["ingest", "--home", str(tmp_path / "h"), "--path", str(tmp_path / "nope.jsonl")]
    )
    assert r.exit_code == 1
    assert r.stderr.startswith("error: no such file or directory: ") and "nope.jsonl" in r.stderr


CODEX_FILE = (
    CORPUS_HOME
    / ".codex/sessions/2025/10/31/rollout-2025-10-31T18-36-16-fa1ac8bf-348e-4b9a-a06d-767050fa1e10.jsonl"
)


def _fake_flow_module(monkeypatch, name: str, attr: str, calls: list):
    """Put a stand-in for the Prefect flow module ``name`` in ``sys.modules``: its flow
    ``attr`` records its arguments and runs nothing (the real flow is covered by
    tests/flows)."""
    import sys
    import types

    def fl(*args, **kwargs):
        calls.append((args, kwargs))
        from ctxkeep.pipeline.summary import Summary

        return Summary(files=1, files_read=1, analytics="flow stand-in").as_dict()

    mod = types.ModuleType(name)
    setattr(mod, attr, fl)
    monkeypatch.setitem(sys.modules, name, mod)


def test_ingest_runs_in_process_without_a_server(store_home, monkeypatch):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    calls: list = []
    _fake_flow_module(monkeypatch, "ctxkeep.flows.ingest", "ingest_flow", calls)
    r = _run(["ingest", "--home", str(store_home), "--json", "--path", str(CODEX_FILE)], monkeypatch)
    assert r.exit_code == 0, r.output
    assert calls == []
    assert json.loads(r.stdout)["entries_new"] == 2  # stored in-process (as test_ingest_explicit_path)


def test_ingest_is_a_flow_run_with_prefect_api_url(store_home, monkeypatch):
    import os

    from ctxkeep.flows import prefect_env

    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    monkeypatch.setattr(prefect_env, "probe_api", lambda u: True)  # a server answers there
    monkeypatch.delenv("PREFECT_LOGGING_ROOT_LEVEL", raising=False)
    calls: list = []
    _fake_flow_module(monkeypatch, "ctxkeep.flows.ingest", "ingest_flow", calls)
    r = _run(["ingest", "--home", str(store_home), "--json", "--path", str(CODEX_FILE)], monkeypatch)
    assert r.exit_code == 0, r.output
    assert len(calls) == 1 and calls[0][0] == (str(store_home),)
    assert calls[0][1]["paths"] == [str(CODEX_FILE)]
    assert json.loads(r.stdout)["analytics"] == "flow stand-in"
    assert "PREFECT_LOGGING_ROOT_LEVEL" not in os.environ  # a real server's logs are the user's
    # --no-prefect wins over the server: in-process
    calls.clear()
    r = _run(
        ["ingest", "--home", str(store_home), "--json", "--no-prefect", "--path", str(CODEX_FILE)],
        monkeypatch,
    )
    assert r.exit_code == 0, r.output
    assert calls == [] and json.loads(r.stdout)["entries_new"] == 2


def test_a_dead_prefect_api_url_runs_in_process_with_one_warning(store_home, monkeypatch):
    """A stale PREFECT_API_URL (nothing listens there; the real probe): ingest runs
    in-process with one warning line, rc 0; with --prefect one error line, rc 1. Before,
    Prefect's client printed a RuntimeError traceback after ~20 s of retries."""
    import os
    import socket

    with socket.socket() as s:  # a free loopback port, closed again: nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/api"
    monkeypatch.setenv("PREFECT_API_URL", url)
    calls: list = []
    _fake_flow_module(monkeypatch, "ctxkeep.flows.ingest", "ingest_flow", calls)
    r = _run(["ingest", "--home", str(store_home), "--json", "--path", str(CODEX_FILE)], monkeypatch)
    assert r.exit_code == 0, r.output
    assert calls == [] and json.loads(r.stdout)["entries_new"] == 2  # in-process
    assert r.stderr.splitlines() == [
        f"warning: no Prefect server answers at PREFECT_API_URL ({url}); running without it "
        "- start that server or unset PREFECT_API_URL"
    ]
    assert "PREFECT_API_URL" not in os.environ
    monkeypatch.setenv("PREFECT_API_URL", url)
    fresh = store_home.parent / "fresh-store"  # the file is new there: a run to do
    r = _run(["ingest", "--home", str(fresh), "--prefect", "--path", str(CODEX_FILE)], monkeypatch)
    assert r.exit_code == 1 and calls == []
    assert r.stderr.splitlines() == [
        f"error: no Prefect server answers at PREFECT_API_URL ({url}) "
        "- start that server, unset PREFECT_API_URL, or drop --prefect"
    ]


def test_probe_api_takes_any_answer_as_a_server(tmp_path):
    """``probe_api``: any HTTP status proves a server (a 404 here, as a 401 of Prefect
    Cloud would); a closed port or a non-HTTP URL is no server."""
    import http.server
    import threading

    from ctxkeep.flows.prefect_env import probe_api

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(404)
            self.end_headers()

        def log_message(self, *a):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), H)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    port = srv.server_address[1]
    try:
        assert probe_api(f"http://127.0.0.1:{port}/api")
    finally:
        srv.shutdown()
        srv.server_close()
    assert not probe_api(f"http://127.0.0.1:{port}/api", timeout=0.5)
    assert not probe_api("ftp://127.0.0.1/api") and not probe_api("not a url")


def test_ingest_with_prefect_flag_is_a_flow_run_without_a_server(store_home, monkeypatch):
    import os

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.delenv("PREFECT_LOGGING_ROOT_LEVEL", raising=False)  # restored after the test
    calls: list = []
    _fake_flow_module(monkeypatch, "ctxkeep.flows.ingest", "ingest_flow", calls)
    r = _run(
        ["ingest", "--home", str(store_home), "--prefect", "--path", str(CODEX_FILE)],
        monkeypatch,
    )
    assert r.exit_code == 0, r.output
    assert len(calls) == 1
    assert "starting Prefect's temporary local server" in r.stderr
    # the temporary server's shutdown noise (SQLAlchemy's CancelledError traceback) stays
    # off the terminal: third-party loggers under Prefect's root logger at CRITICAL
    assert os.environ["PREFECT_LOGGING_ROOT_LEVEL"] == "CRITICAL"


def test_ingest_finds_a_running_serve(store_home, monkeypatch):
    """A ``ctxkeep serve`` of this home (its serve file, its process alive, its health
    answering) makes ingest a flow run recorded on serve's server."""
    import os

    from ctxkeep.flows import prefect_env

    # set, then deleted: monkeypatch restores "unset" after the test (ingest sets it in
    # os.environ itself; left set, the next test's ingest warns of a dead server)
    monkeypatch.setenv("PREFECT_API_URL", "")
    monkeypatch.delenv("PREFECT_API_URL")
    url = "http://127.0.0.1:4299/api"
    prefect_env.write_serve_file(store_home, url)  # pid: this process, alive
    probed: list = []
    monkeypatch.setattr(prefect_env, "probe_health", lambda u, timeout=0.05: probed.append(u) or True)
    calls: list = []
    _fake_flow_module(monkeypatch, "ctxkeep.flows.ingest", "ingest_flow", calls)
    r = _run(["ingest", "--home", str(store_home), "--json", "--path", str(CODEX_FILE)], monkeypatch)
    assert r.exit_code == 0, r.output
    assert probed == [url] and len(calls) == 1
    assert os.environ["PREFECT_API_URL"] == url


def test_serve_file_is_trusted_only_when_its_serve_answers(store_home, monkeypatch):
    from ctxkeep.flows import prefect_env

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    assert prefect_env.serve_api_url(store_home) is None  # no file
    url = "http://127.0.0.1:4299/api"
    f = prefect_env.write_serve_file(store_home, url)
    assert f == store_home / "prefect" / "serve.json" and (f.stat().st_mode & 0o777) == 0o600
    assert prefect_env.serve_api_url(store_home, probe=lambda u: True) == url
    assert prefect_env.serve_api_url(store_home, probe=lambda u: False) is None
    assert prefect_env.run_as_flow(store_home, None, probe=lambda u: False) is False
    # a serve that died without removing its file: its pid is gone, no request is made
    f.write_text(json.dumps({"api_url": url, "pid": 2**22 + 12345}))
    assert prefect_env.serve_api_url(store_home, probe=lambda u: pytest.fail("probed")) is None
    f.write_text("not json")
    assert prefect_env.serve_api_url(store_home, probe=lambda u: pytest.fail("probed")) is None
    # serve removes only its own file
    prefect_env.write_serve_file(store_home, url)
    prefect_env.remove_serve_file(store_home)
    assert not f.exists()


def test_probe_asks_loopback_health_only(tmp_path):
    """The real probe against a real HTTP server on loopback; other hosts are refused
    without a request."""
    import http.server
    import threading

    from ctxkeep.flows.prefect_env import probe_health

    paths: list = []

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            paths.append(self.path)
            self.send_response(200 if self.path == "/api/health" else 404)
            self.end_headers()
            self.wfile.write(b"true")

        def log_message(self, *a):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), H)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        port = srv.server_address[1]
        assert probe_health(f"http://127.0.0.1:{port}/api", timeout=2)
        assert not probe_health(f"http://127.0.0.1:{port}/other", timeout=2)
        assert paths == ["/api/health", "/other/health"]
    finally:
        srv.shutdown()
        srv.server_close()
    assert not probe_health("http://example.invalid:4200/api")  # not loopback: no request
    assert not probe_health(f"http://127.0.0.1:{port}/api", timeout=0.05)  # nothing listens now


def test_reindex_chooses_like_ingest(store_home, monkeypatch):
    """The maintenance commands make the same choice (``cli.maintenance._as_flow``):
    in-process without a server, their flow with PREFECT_API_URL."""
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    r = _run(["ingest", "--home", str(store_home), "--json", "--path", str(CODEX_FILE)], monkeypatch)
    assert r.exit_code == 0, r.output
    calls: list = []
    _fake_flow_module(monkeypatch, "ctxkeep.flows.maintenance", "reindex_flow", calls)
    r = CliRunner().invoke(app, ["reindex", "--home", str(store_home), "--json", "--no-analytics"])
    assert r.exit_code == 0, r.output
    assert calls == [] and json.loads(r.stdout)["chunks"] > 0  # reindexed in-process
    from ctxkeep.flows import prefect_env

    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    monkeypatch.setattr(prefect_env, "probe_api", lambda u: True)
    calls_r: list = []
    _fake_flow_module(monkeypatch, "ctxkeep.flows.maintenance", "reindex_flow", calls_r)
    r = CliRunner().invoke(app, ["reindex", "--home", str(store_home), "--json", "--no-analytics"])
    assert len(calls_r) == 1 and calls_r[0][1] == {"analytics": False}


def test_ingest_without_a_server_does_not_import_prefect(store_home, tmp_path):
    """A real first ingest (one Codex file) as a whole process, no server: the run is
    in-process, so Prefect is never imported."""
    summary, imported = _ingest_in_a_process(
        tmp_path, store_home, "--path", str(CODEX_FILE), watch=("prefect",)
    )
    assert imported == [] and summary["entries_new"] == 2


def _store_files(home) -> dict[str, tuple[int, bytes]]:
    """Each file of the store directory: (mtime_ns, bytes)."""
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(home.iterdir()) if p.is_file()}


def test_an_ingest_with_nothing_new_writes_nothing_to_the_store(store, monkeypatch):
    """Nothing new: the plan reads the store through a read-only connection (a writable
    open commits its schema check: a WAL write, a checkpoint, fsyncs); store.db is
    untouched, byte for byte and its mtime."""
    from ctxkeep.sinks import sqlite as sqlite_store

    conn = sqlite_store.connect(store)  # a writer's close leaves no WAL behind
    conn.close()
    before = _store_files(store)
    r = _run(["ingest", "--home", str(store), "--no-prefect", "--json"], monkeypatch)
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert s["files"] > 0 and s["files_read"] == 0 and s["entries_new"] == 0
    after = _store_files(store)
    assert after["store.db"] == before["store.db"]
    assert after.get("store.db-wal", (0, b""))[1] == b""  # no frame written


def test_an_ingest_opens_the_store_writable_when_its_schema_is_not_current(store, monkeypatch):
    """A store at another schema version is opened writable for the plan, as before:
    that open migrates it (a reader never migrates)."""
    from ctxkeep.sinks import sqlite as sqlite_store

    opened = []
    real = sqlite_store.connect

    def spy(home, *, readonly=False):
        opened.append(readonly)
        return real(home, readonly=readonly)

    monkeypatch.setattr(sqlite_store, "connect", spy)
    monkeypatch.setattr(sqlite_store, "SCHEMA_VERSION", sqlite_store.SCHEMA_VERSION + 1)
    r = _run(["ingest", "--home", str(store), "--no-prefect", "--json"], monkeypatch)
    assert r.exit_code == 0, r.output
    assert opened[:2] == [True, False]  # read-only first, then writable for the plan


def test_a_file_read_again_does_not_claim_to_quarantine_its_bad_lines_anew(tmp_path, monkeypatch):
    """A session file that shrank and regrew is read again from its start: the summary
    gives the bad lines read and says they are in quarantine, each stored once; it used
    to say ``quarantined 3 lines`` while the quarantine total stayed where it was."""
    import sqlite3

    proj = tmp_path / "home" / ".claude" / "projects" / "-tmp-x"
    proj.mkdir(parents=True)
    good = [
        json.dumps({"type": "user", "uuid": f"u{i}", "sessionId": "s1", "timestamp": f"2025-01-01T00:00:0{i}Z",
                    "cwd": "/tmp/x", "message": {"role": "user", "content": f"hello {i}"}})
        for i in range(3)
    ]  # fmt: skip
    full = "\n".join([good[0], "{not json 1", good[1], "{not json 2", "{not json 3", good[2]]) + "\n"
    bad = sum(1 for line in full.splitlines() if not line.startswith('{"'))
    f = proj / "s.jsonl"
    store = tmp_path / "store"
    args = ["ingest", "--home", str(store), "--no-prefect", "--no-progress", "--agent", "claude-code"]
    outs = []
    for text in (full, full[:100], full):
        f.write_text(text)
        r = _run(args, monkeypatch, home=tmp_path / "home")
        assert r.exit_code == 0, r.output
        outs.append(r.stdout.splitlines()[0])
    conn = sqlite3.connect(f"file:{store / 'store.db'}?mode=ro", uri=True)
    total = conn.execute("SELECT count(*) FROM quarantine").fetchone()[0]
    conn.close()
    assert total == bad == 3  # (the cut line of run 2 taken back when the file grew: test_unended_line)
    assert outs[0].endswith(f"; {bad} bad lines (in quarantine, each stored once: `ctxkeep quarantine`)")
    # the 100 bytes end inside a line, judged final (the file is idle: CTXKEEP_IDLE_SECONDS=0)
    assert outs[1].endswith("; 1 bad line (in quarantine, each stored once: `ctxkeep quarantine`)")
    assert outs[2].endswith(f"; {bad} bad lines (in quarantine, each stored once: `ctxkeep quarantine`)")
    assert "quarantined 3" not in "\n".join(outs)
