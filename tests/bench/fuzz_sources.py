"""Coverage-guided fuzzing of every source's ``read`` (a script, not a test; not
collected by pytest): the hostile-input property tests (``tests/sources/test_hostile_*``)
run a few dozen examples each in CI; this harness runs as long as you let it.

Each input picks a sample file (one per agent and file mode, ``hostile_sources.samples``)
and a way to damage it, from the input's first bytes:

- ``bytes``: the rest of the input is the whole file;
- ``splice``: the sample with the rest of the input written over it at an offset;
- ``record``: one JSON record of the sample (a JSONL line, the document, or for a
  database a JSON cell) with one member replaced by JSON decoded from the input;
- ``cell``: for a database, one cell of one row set to the input's bytes or text.

The damaged copy is read through the agent's source; an exception out of ``read``, or
a line or document not accounted for (``hostile_sources.check_accounted``), is a
finding: atheris stops and writes the input to ``crash-<sha1>`` (replay it with
``fuzz_sources.py crash-<sha1>``); without atheris the script prints the failing input
and stops.

With atheris (``uv sync --group fuzz``: atheris 3.x installs from a wheel on CPython
3.11 x86-64 Linux) the ctxkeep source modules are instrumented for coverage and
libFuzzer drives the inputs; any libFuzzer flag passes through::

    uv run --group fuzz python tests/bench/fuzz_sources.py -max_total_time=300 [CORPUS_DIR]
    uv run --group fuzz python tests/bench/fuzz_sources.py --agent crush -runs=20000

Without atheris (``--random``, or when it is not installed) the same inputs come from a
seeded random generator: no coverage guidance, but the same checks::

    uv run python tests/bench/fuzz_sources.py --random --runs 5000 --seed 1

Prints, at the end, inputs run per second and per sample (agent-mode).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TESTS))

OPS = ("bytes", "splice", "record", "cell")


def _load(agent: str | None):
    from conftest import CORPUS_HOME
    from hostile_sources import samples

    out = [s for s in samples(CORPUS_HOME) if agent in (None, s.agent)]
    if not out:
        sys.exit(f"error: no sample for agent {agent} - run with one of the 16 agent names")
    return out


class Target:
    """One fuzz input → one read; counts runs per sample."""

    def __init__(self, samples, workdir: Path):
        from hostile_sources import check_accounted, db_cells, json_paths, place, read_all, set_at

        self.samples = samples
        self.work = workdir
        self.runs: Counter = Counter()
        self._check, self._paths, self._place, self._read, self._set, self._cells = (
            check_accounted,
            json_paths,
            place,
            read_all,
            set_at,
            db_cells,
        )
        self._records = {s.id: self._records_of(s) for s in samples}

    def _records_of(self, s) -> list:
        """The JSON records of a sample: ("line", i, obj), ("doc", None, obj) or
        ("cell", (table, column, rowid), obj)."""
        if s.mode == "sqlite":
            return [("cell", (t, col, rowid), v) for t, col, rowid, v in self._cells(s.path, 50)]
        if s.path.suffix not in (".json", ".jsonl"):
            return []
        raw = s.path.read_text(encoding="utf-8")
        if s.mode == "append":
            return [("line", i, json.loads(ln)) for i, ln in enumerate(raw.split("\n")) if ln.strip()][:200]
        return [("doc", None, json.loads(raw))]

    def one(self, sample_i: int, op: str, pick: int, payload: bytes) -> None:
        """Damage sample ``sample_i`` by ``op`` (``pick`` chooses a record, path or
        offset; ``payload`` is the damage) and read it; raises on a finding."""
        s = self.samples[sample_i % len(self.samples)]
        self.runs[s.id] += 1
        d = Path(tempfile.mkdtemp(dir=self.work))
        try:
            p = self._place(s, d)
            data = self._damage(s, p, op, pick, payload)
            batches = self._read(s, p)
            self._check(s, data if s.mode == "append" else None, batches)
        finally:
            for f in d.iterdir():
                f.unlink()
            d.rmdir()

    def _damage(self, s, p: Path, op: str, pick: int, payload: bytes) -> bytes | None:
        recs = self._records[s.id]
        if op == "bytes" or (op in ("record", "cell") and not recs):
            p.write_bytes(payload)
            return payload
        if op == "splice":
            data = bytearray(p.read_bytes())
            at = pick % (len(data) + 1)
            data[at : at + len(payload)] = payload
            p.write_bytes(bytes(data))
            return bytes(data)
        kind, where, obj = recs[pick % len(recs)]
        if kind == "cell":
            table, col, rowid = where
            if op == "cell":
                value = payload if pick & 1 else payload.decode("utf-8", "replace")
            else:
                try:
                    doc = json.loads(obj) if isinstance(obj, str) else obj
                    paths = list(self._paths(doc))
                    value = json.dumps(self._set(doc, paths[(pick >> 8) % len(paths)], _json(payload)))
                except (ValueError, TypeError):
                    value = payload.decode("utf-8", "replace")
            c = sqlite3.connect(p)
            try:
                c.execute(f'UPDATE "{table}" SET "{col}" = ? WHERE rowid = ?', (value, rowid))
                c.commit()
            except sqlite3.IntegrityError:
                pass
            finally:
                c.close()
            return None
        paths = list(self._paths(obj))
        new = json.dumps(self._set(obj, paths[(pick >> 8) % len(paths)], _json(payload)))
        if kind == "line":
            lines = p.read_text(encoding="utf-8").split("\n")
            lines[where] = new
            data = "\n".join(lines).encode("utf-8", "surrogatepass")
        else:
            data = new.encode("utf-8", "surrogatepass")
        p.write_bytes(data)
        return data


def _json(payload: bytes):
    """A JSON value from bytes: the bytes parsed when they are JSON, else their text."""
    text = payload.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


def _split(data: bytes) -> tuple[int, str, int, bytes]:
    """(sample index, op, pick, payload) from a raw fuzz input."""
    head = data[:4].ljust(4, b"\0")
    return head[0], OPS[head[1] % len(OPS)], int.from_bytes(head[2:4], "little"), data[4:]


def run_atheris(target: Target, argv: list[str]) -> None:
    import atheris

    def test_one_input(data: bytes) -> None:
        target.one(*_split(data))

    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()


def run_random(target: Target, runs: int, seed: int) -> None:
    rng = random.Random(seed)
    for i in range(runs):
        n = rng.choice((0, 1, 8, 64, 512, 4096))
        data = bytes(rng.getrandbits(8) for _ in range(4)) + _payload(rng, n)
        try:
            target.one(*_split(data))
        except Exception:
            print(f"finding at input {i} (seed {seed}): {data[:200]!r}…", file=sys.stderr)
            raise


def _payload(rng: random.Random, n: int) -> bytes:
    """Random bytes, or JSON-looking text, or text with newlines."""
    k = rng.random()
    if k < 0.4:
        return bytes(rng.getrandbits(8) for _ in range(n))
    if k < 0.7:
        atoms = ["null", "true", "1e999", "-1", '"x"', "[]", "{}", '{"type":"user"}', '[{"type":5}]', '""']
        return rng.choice(atoms).encode()
    alphabet = 'ab{}[]":,\n\\ \x00\u00e9字'
    return "".join(rng.choice(alphabet) for _ in range(n)).encode("utf-8", "surrogatepass")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], add_help=True)
    ap.add_argument("--agent", help="fuzz one agent's samples only")
    ap.add_argument("--random", action="store_true", help="seeded random inputs instead of atheris")
    ap.add_argument("--runs", type=int, default=2000, help="inputs for --random")
    ap.add_argument("--seed", type=int, default=1)
    args, rest = ap.parse_known_args()
    os.environ.setdefault("CTXKEEP_IDLE_SECONDS", "0")
    try:
        import atheris
    except ImportError:
        atheris = None
    if atheris is None and not args.random:
        print("atheris is not installed (uv sync --group fuzz): running --random", file=sys.stderr)
        args.random = True
    with tempfile.TemporaryDirectory() as work:
        if not args.random:
            with atheris.instrument_imports(include=["ctxkeep"]):
                import ctxkeep.sources  # noqa: F401  (instrumented for coverage)
        target = Target(_load(args.agent), Path(work))
        t0 = time.perf_counter()
        try:
            if args.random:
                run_random(target, args.runs, args.seed)
            else:
                run_atheris(target, [sys.argv[0], *rest])
        finally:
            dt = time.perf_counter() - t0
            n = sum(target.runs.values())
            print(f"{n:,} inputs in {dt:.1f} s ({n / max(dt, 1e-9):,.0f}/s)", file=sys.stderr)
            for sid, k in sorted(target.runs.items()):
                print(f"  {sid}: {k:,}", file=sys.stderr)


if __name__ == "__main__":
    main()
