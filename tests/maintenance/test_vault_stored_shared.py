"""`vault status` "stored" counts an object once however many files hold it (a new
user's store said "stored" 2,592,037 bytes beside 2,522,276 bytes of packs on disk: it
summed each file's pieces, and pieces two files share were counted twice). Here a Claude
Code session and a byte-for-byte copy of it (a fork as some tools make one) share every
piece."""

from __future__ import annotations

import json
import shutil

from typer.testing import CliRunner

from ctxkeep.cli import app
from tests.conftest import corpus, ingest, q

SESSION = ".claude/projects/-Users-chip-dev-ai-music/d3ad4cdc-5657-435d-98fa-0035d53e383d.jsonl"


def _status(store) -> dict:
    r = CliRunner().invoke(app, ["vault", "status", "--home", str(store), "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_stored_counts_shared_pieces_once_and_says_how_much_is_shared(tmp_path):
    home, store = tmp_path / "home", tmp_path / "store"
    src = corpus(SESSION)
    dst = home / SESSION
    dst.parent.mkdir(parents=True)
    shutil.copy2(src, dst)
    ingest(home, store, "claude-code")
    one = _status(store)
    shutil.copy2(src, dst.with_name("0a0a0a0a-1111-4222-8333-444455556666.jsonl"))  # the copy
    ingest(home, store, "claude-code")
    two = _status(store)

    (cc1,) = [a for a in one["agents"] if a["files"]]
    (cc2,) = [a for a in two["agents"] if a["files"]]
    assert (cc1["files"], cc2["files"]) == (1, 2)
    # the same pieces: nothing more stored, and not more than the packs on disk
    assert cc2["stored_bytes"] == cc1["stored_bytes"] == two["stored_bytes"]
    assert two["stored_bytes"] <= two["pack_bytes"]
    objects = q(store, "SELECT coalesce(sum(stored), 0) FROM vault_objects")[0][0]
    assert two["stored_bytes"] == objects  # every object is held, each counted once
    # what is shared, and what counting per file would have said
    assert one["shared_bytes"] < two["shared_bytes"] == two["stored_bytes"]
    assert two["per_reference_bytes"] == 2 * one["per_reference_bytes"]
    assert one["per_reference_bytes"] >= one["stored_bytes"]


def test_the_text_says_stored_once_and_shared(tmp_path):
    home, store = tmp_path / "home", tmp_path / "store"
    dst = home / SESSION
    dst.parent.mkdir(parents=True)
    shutil.copy2(corpus(SESSION), dst)
    shutil.copy2(dst, dst.with_name("0a0a0a0a-1111-4222-8333-444455556666.jsonl"))
    ingest(home, store, "claude-code")
    st = _status(store)
    r = CliRunner().invoke(app, ["vault", "status", "--home", str(store)], env={"COLUMNS": "200"})
    assert (
        f"stored: {st['stored_bytes']:,} bytes, each object once; {st['shared_bytes']:,} of them shared by "
        f"several files or generations (counted per file: {st['per_reference_bytes']:,}); "
        f"packs on disk {st['pack_bytes']:,}"
    ) in " ".join(r.stdout.split())  # (folded at the width of the console the process made first)
