"""``ctxkeep export parquet s3://…`` and ``report --lake s3://…`` against an S3 API on
loopback (moto's server in a thread; s3fs as ``ctxkeep[lake]`` brings it): the lake's
objects, an idempotent second export, a purge reaching the bucket, and the daily
report over the bucket equal to the local one. Nothing leaves 127.0.0.1."""

from __future__ import annotations

import logging

import pytest
from typer.testing import CliRunner

from conftest import CORPUS_HOME, ingest
from ctxkeep.cli import app

s3fs = pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.server")
runner = CliRunner()


@pytest.fixture(scope="module")
def bucket():
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    srv = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    srv.start()
    host, port = srv.get_host_and_port()
    mp = pytest.MonkeyPatch()
    for k, v in {
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        mp.setenv(k, v)
    s3fs.S3FileSystem.clear_instance_cache()
    fs = s3fs.S3FileSystem()
    fs.mkdir("team-lake")
    yield fs
    s3fs.S3FileSystem.clear_instance_cache()
    mp.undo()
    srv.stop()


@pytest.fixture
def home(tmp_path):
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    h = tmp_path / "h"
    h.mkdir()
    (h / "config.toml").write_text('machine = "laptop"\n')
    ingest(CORPUS_HOME, h, ["claude-code", "gemini-cli"])
    return h


def cli(*args):
    return runner.invoke(app, [*map(str, args)])


def test_export_to_s3_and_report_over_it(bucket, home):
    import json

    from ctxkeep.maintenance.export import export_parquet
    from ctxkeep.query import reports as R

    url = "s3://team-lake/t1"
    rep = export_parquet(home, url)
    objects = [p for p in bucket.find("team-lake/t1") if p.endswith(".parquet")]
    assert len(objects) == sum(t["files_written"] for t in rep["tables"].values()) > 0
    assert all(p.split("/")[3] == "machine=laptop" for p in objects)
    assert not [p for p in bucket.find("team-lake/t1") if "_staging" in p]
    again = export_parquet(home, url)
    assert sum(t["rows_written"] for t in again["tables"].values()) == 0
    assert sorted(p for p in bucket.find("team-lake/t1") if p.endswith(".parquet")) == sorted(objects)
    lake = cli("report", "daily", "--lake", url, "--json", "-z", "UTC")
    local = cli("report", "daily", "--home", home, "--json", "-z", "UTC")
    assert lake.exit_code == 0 and local.exit_code == 0, lake.output + local.output
    assert json.loads(lake.stdout) == json.loads(local.stdout)
    assert json.loads(lake.stdout)["schema"] == R.SCHEMA


def test_purge_reaches_the_bucket(bucket, home):
    import pyarrow.dataset as ds

    from ctxkeep.maintenance.export import export_parquet

    url = "s3://team-lake/t2"
    export_parquet(home, url)
    sid = "d3ad4cdc-5657-435d-98fa-0035d53e383d"
    r = cli("purge", "--session", sid, "--yes", "--home", home)
    assert r.exit_code == 0, r.output
    export_parquet(home, url)
    for table in ("usage", "sessions", "entries"):
        t = ds.dataset(
            f"team-lake/t2/{table}", filesystem=bucket, format="parquet", partitioning="hive"
        ).to_table()
        assert t.num_rows > 0 and sid not in t.column("session_id").to_pylist(), table
