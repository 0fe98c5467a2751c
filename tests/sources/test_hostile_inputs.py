"""Hostile input, property-tested, for every source (one sample file per agent and
file mode, ``hostile.samples``): arbitrary bytes, arbitrary JSON and valid records with
one part replaced by arbitrary JSON never raise out of the source's ``read``, and every
line or document is accounted for (``hostile.check_accounted``: an entry, a quarantined
row, or a counted line). Databases: ``test_hostile_db.py``."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CORPUS_HOME
from hostile_sources import (
    JSON_SUFFIXES,
    check_accounted,
    dumps_like,
    json_paths,
    json_values,
    place,
    read_all,
    samples,
    set_at,
)

SAMPLES = samples(CORPUS_HOME) if CORPUS_HOME.is_dir() else []
FILES = [s for s in SAMPLES if s.mode != "sqlite"]
JSON_FILES = [s for s in FILES if s.path.suffix in JSON_SUFFIXES]

SETTINGS = settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)

JSON = json_values()


def _read(sample, data: bytes):
    with tempfile.TemporaryDirectory() as d:
        p = place(sample, Path(d))
        p.write_bytes(data)
        batches = read_all(sample, p)
    check_accounted(sample, data, batches)
    return batches


def _ids(samples_):
    return [s.id for s in samples_]


pytestmark = pytest.mark.skipif(not SAMPLES, reason="shared/corpus not present")


def test_every_agent_has_a_sample():
    from ctxkeep.sources import SOURCES

    assert {s.agent for s in SAMPLES} == set(SOURCES)


@pytest.mark.parametrize("sample", FILES, ids=_ids(FILES))
@SETTINGS
@given(data=st.binary(max_size=3000))
def test_arbitrary_bytes(sample, data):
    _read(sample, data)


@pytest.mark.parametrize("sample", FILES, ids=_ids(FILES))
@SETTINGS
@given(
    lines=st.lists(st.binary(max_size=200).filter(lambda b: b"\n" not in b), max_size=8),
    tail=st.binary(max_size=40),
)
def test_arbitrary_lines(sample, lines, tail):
    _read(sample, b"".join(line + b"\n" for line in lines) + tail)


@pytest.mark.parametrize("sample", JSON_FILES, ids=_ids(JSON_FILES))
@SETTINGS
@given(values=st.lists(JSON, min_size=1, max_size=6))
def test_arbitrary_json(sample, values):
    if sample.mode == "append":
        data = "".join(json.dumps(v) + "\n" for v in values)
    else:
        data = json.dumps(values[0])
    _read(sample, data.encode())


def _drop(obj, path):
    """``obj`` without the member at ``path`` (a dict key or a list item)."""
    parent, last = path[:-1], path[-1]
    node = obj
    for k in parent:
        node = node[k]
    if isinstance(node, dict):
        new = {k: v for k, v in node.items() if k != last}
    else:
        new = [v for i, v in enumerate(node) if i != last]
    return set_at(obj, parent, new)


@pytest.mark.parametrize("sample", JSON_FILES, ids=_ids(JSON_FILES))
@SETTINGS
@given(st.data())
def test_valid_records_with_one_part_replaced(sample, data):
    """A real record of the agent with one member replaced by arbitrary JSON, or
    removed: the shapes a newer or older agent version, or a bug, could write."""
    raw = sample.path.read_text(encoding="utf-8")
    if sample.mode == "append":
        lines = [ln for ln in raw.splitlines() if ln.strip()][:40]
        i = data.draw(st.integers(0, len(lines) - 1), label="line")
        doc, original = json.loads(lines[i]), lines[i]
    else:
        doc, original = json.loads(raw), raw
    paths = list(json_paths(doc))
    path = data.draw(st.sampled_from(paths), label="path")
    if path and data.draw(st.booleans(), label="remove"):
        new = _drop(doc, path)
    else:
        new = set_at(doc, path, data.draw(JSON, label="value"))
    text = dumps_like(original, new)
    if sample.mode == "append":
        lines[i] = text
        out = "".join(ln + "\n" for ln in lines)
    else:
        out = text
    _read(sample, out.encode("utf-8", "surrogatepass"))
