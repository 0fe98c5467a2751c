"""The app's long-held connection (``nbkit.Store.lite``) follows a store replaced by
a rename (reparse, reindex, restore): it showed the old store until a restart."""

from __future__ import annotations

import os
import shutil
import sqlite3

from ctxkeep.pipeline import engine as pipeline
from ctxkeep.render.nbkit import Store
from ctxkeep.sources.contract import DiscoveryContext
from fixtures.bad_input import line, rec


def test_store_lite_reads_the_store_now_in_place(tmp_path):
    proj = tmp_path / "home" / ".claude" / "projects" / "-tmp-x"
    proj.mkdir(parents=True)
    (proj / "s.jsonl").write_bytes(line(rec(1)) + line(rec(2)))
    store = tmp_path / "store"
    pipeline.run_ingest(store, ctx=DiscoveryContext(home=tmp_path / "home", env={}))
    st = Store(str(store), "UTC", "", "")
    n = st.lite.execute("SELECT count(*) FROM entries").fetchone()[0]
    assert n > 0
    # a new store.db put in place by a rename, with one entry less
    shutil.copy(store / "store.db", tmp_path / "new.db")
    conn = sqlite3.connect(tmp_path / "new.db")
    conn.execute("DELETE FROM entry_rows WHERE rowid = (SELECT max(rowid) FROM entry_rows)")
    conn.commit()
    conn.close()
    os.replace(tmp_path / "new.db", store / "store.db")
    assert st.lite.execute("SELECT count(*) FROM entries").fetchone()[0] == n - 1
