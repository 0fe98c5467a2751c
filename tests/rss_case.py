"""Hostile session files for the bounded-memory checks (issue 24, item 4) and the
whole-process ingest that measures their peak RSS. Used by
tests/pipeline/test_bounded_memory.py and tests/bench/bench_rss.py.

The big lines are mostly sparse (zeros the file system does not store), so a 300 MB
case costs a few KB of disk and a moment to make."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SID = "44444444-2222-3333-4444-555555555555"
MIB = 1024 * 1024


def _line(uuid: str, text: str) -> bytes:
    rec = {
        "type": "user",
        "sessionId": SID,
        "uuid": uuid,
        "timestamp": "2026-01-01T00:00:00Z",
        "cwd": "/proj",
        "message": {"role": "user", "content": text},
    }
    return json.dumps(rec).encode() + b"\n"


def session_file(home: Path, name: str) -> Path:
    proj = home / ".claude" / "projects" / "-proj"
    proj.mkdir(parents=True, exist_ok=True)
    return proj / name


def unterminated_line(home: Path, mb: int) -> Path:
    """A session whose one good line is followed by an ``mb`` MB last line that never
    ends (``{"type": "user", "x": "`` and zeros)."""
    p = session_file(home, f"{SID}.jsonl")
    with open(p, "wb") as f:
        f.write(_line("u1", "before the unterminated line"))
        f.write(b'{"type": "user", "x": "')
        f.truncate(mb * 1_000_000)
    return p


def single_line(home: Path, mb: int) -> Path:
    """A session with a good line, one ``mb`` MB line (terminated) and a good line after."""
    p = session_file(home, f"{SID}.jsonl")
    with open(p, "wb") as f:
        f.write(_line("u1", "before the huge line"))
        f.write(b'{"type": "user", "x": "')
        f.truncate(mb * 1_000_000)
        f.seek(0, os.SEEK_END)
        f.write(b'"}\n')
        f.write(_line("u2", "after the huge line"))
    return p


def text_line(home: Path, mb: float) -> Path:
    """A session with one valid line whose message is ``mb`` MB of text (no zeros:
    parsed, redacted, chunked and counted like a real tool result)."""
    p = session_file(home, f"{SID}.jsonl")
    words = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod\n"
    text = words * int(mb * 1_000_000 / len(words))
    with open(p, "wb") as f:
        f.write(_line("u1", "before"))
        f.write(_line("u2", text))
    return p


def ingest_peak_rss(home: Path, store: Path, python: str = sys.executable, cwd: Path | None = None) -> dict:
    """``ctxkeep ingest --no-prefect --json`` as a whole process with ``HOME=home``:
    ``{"rc", "rss_mb" (peak RSS of the process or of a child it waited for, the reader
    process: wait4), "summary" (its --json, or None), "stderr"}``."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("CTXKEEP_", "PREFECT_", "CLAUDE_", "CODEX_"))
    }
    env.update(HOME=str(home), CTXKEEP_HOME=str(store), CTXKEEP_IDLE_SECONDS="0")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(
            [python, "-m", "ctxkeep", "ingest", "--no-prefect", "--json", "--no-progress"],
            env=env,
            stdout=out,
            stderr=err,
            cwd=cwd,
        )
        peak_kib = _poll_peak(p) if Path(f"/proc/{p.pid}/status").exists() else 0
        _, status, ru = os.wait4(p.pid, 0)
        rc = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode(errors="replace")
    try:
        summary = json.loads(stdout)
    except ValueError:
        summary = None
    if peak_kib:
        rss = peak_kib / 1024
    else:  # no /proc: wait4's figure (it may count the parent's memory, see _poll_peak)
        rss = ru.ru_maxrss / 1024 if sys.platform != "darwin" else ru.ru_maxrss / MIB
    return {"rc": rc, "rss_mb": round(rss, 1), "summary": summary, "stderr": stderr}


def _poll_peak(p: subprocess.Popen) -> int:
    """The largest ``VmHWM`` (KiB: a process's own peak since its exec) of ``p`` and its
    descendants, polled every 10 ms until ``p`` exits (``p`` is not reaped: the caller
    waits). ``ru_maxrss`` from ``wait4`` cannot serve on Linux: a child's counts the
    memory of the process it was forked from, so under a pytest process of ~1 GB every
    child measured 1,070 MB (the CI trial)."""
    import time

    peak = 0
    while True:
        try:
            if os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return peak
        except ChildProcessError:
            return peak
        todo, seen = [p.pid], set()
        while todo:
            q = todo.pop()
            seen.add(q)
            try:
                for line in Path(f"/proc/{q}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
                for t in Path(f"/proc/{q}/task").glob("*/children"):
                    todo += [int(c) for c in t.read_text().split() if int(c) not in seen]
            except (OSError, ValueError):
                pass
        time.sleep(0.01)
