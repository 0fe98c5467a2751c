"""Helpers for the database-source tests: writable copies of corpus parts and
fixtures in tmp_path (never write into shared/corpus), and store queries."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from conftest import CORPUS_HOME, FIXTURES, q


def writable_copy(src: Path, dst: Path) -> Path:
    """Copy ``src`` (file or tree) to ``dst`` keeping mtimes, then make it writable
    (corpus files are 0444 in 0555 folders)."""
    if src.is_dir():
        shutil.copytree(src, dst, dirs_exist_ok=True)
    else:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
    for root, _dirs, files in os.walk(dst if dst.is_dir() else dst.parent):
        os.chmod(root, 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    return dst


def corpus_part(rel: str, home: Path) -> Path:
    """A writable copy of ``CORPUS_HOME/rel`` at ``home/rel``."""
    return writable_copy(CORPUS_HOME / rel, home / rel)


def fixture_home(agent: str, home: Path) -> Path:
    """A writable copy of ``tests/fixtures/<agent>/home`` merged into ``home``."""
    return writable_copy(FIXTURES / agent / "home", home)


def kinds(store: Path, agent: str) -> dict:
    """``{(role, kind): n}`` of an agent's entries."""
    return {
        (r, k): n
        for r, k, n in q(store, "SELECT role, kind, count(*) FROM entries WHERE agent=? GROUP BY 1, 2", agent)
    }


def usage_by_day(store: Path, agent: str) -> dict:
    """``{day: (input, output, cache_read, cache_creation)}`` from the usage table."""
    return {
        d: tuple(v)
        for d, *v in q(
            store,
            "SELECT substr(ts,1,10), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), "
            "sum(cache_creation_tokens) FROM usage WHERE agent=? GROUP BY 1 ORDER BY 1",
            agent,
        )
    }


#: SQL expression for the text of entry ``e`` (texts live once per content, in chunks)
TEXT = (
    "(SELECT group_concat(ch.text, '') FROM chunks ch JOIN contents c "
    "ON c.content_id = ch.content_id WHERE c.content_hash = e.content_hash)"
)
