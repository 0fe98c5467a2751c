"""Ctrl-C (and SIGTERM) trials of ``ctxkeep ingest`` (newuser23 finding 3: a SIGINT 45 s
into an ingest was lost in 2 of 8 trials: no "SIGINT: stopping" line, the run went on
to its end and exited 0). A script that prints what it saw, not a test.

Each trial is a whole ``python -m ctxkeep ingest --no-progress`` process in a session
of its own (as the newuser's ``ctrlc.py`` started it), into a store of its own, sent
one signal ``--at`` seconds after its start (or at a point of the run:
``--at spawn`` sends it while a reader process is started, ``prestart.start_child``'s
window where the starting thread blocks SIGINT). Just before the signal and 50 ms after,
every thread's ``/proc/PID/task/TID/status`` is read: its name and its ``SigBlk``,
``SigPnd``, ``ShdPnd``, ``SigIgn``, ``SigCgt`` masks, of which the signal's bit is
printed (``B``locked, ``P``ending in the thread, pending in the ``S``hared set,
``I``gnored, ``C``aught), with the threads that block it named. Then it checks: the
"SIG…: stopping" line, the exit code (130 for SIGINT, 143 for SIGTERM), no traceback,
the seconds from the signal to the exit, ``PRAGMA integrity_check`` of ``store.db``,
and that a second, unsignalled ingest brings the store to the entries of a run never
stopped (no data lost, none twice).

``--start`` says how the process is started: ``fg`` (as from a terminal: SIGINT is
Python's handler), ``bg`` (SIGINT ignored, as a script's ``cmd &`` in a shell without
job control starts it: the shell sets SIG_IGN and the process inherits it), ``blocked``
(SIGINT and SIGTERM blocked in the mask it inherits). ``--readers N`` runs N loops of
read-only ctxkeep commands on the store meanwhile (``stats``, ``search``, ``sessions``,
``compress --dry-run``), as in the newuser's trials.

    .venv/bin/python tests/bench/ctrlc_trials.py --tree big --at 2,5,10,spawn --start fg,bg
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("CTXKEEP_CORPUS", ROOT.parent / "shared" / "corpus"))
WORK = Path(os.environ.get("CTRLC_WORK", "/tmp/ctrlc24-trials"))

#: the masks of ``/proc/PID/task/TID/status`` read for each thread
MASKS = ("SigBlk", "SigPnd", "ShdPnd", "SigIgn", "SigCgt")


def big_home(mb: int) -> Path:
    """A HOME holding one Claude Code session of about ``mb`` MB in a new project
    (``/tmp/big``), its lines the corpus's biggest Claude Code session's again and
    again with fresh ids (the newuser's 109 MB, 150,000-line file), and a small first
    session so that a store exists before it (the trials read the big one into it)."""
    home = WORK / f"home-big{mb}"
    target = home / ".claude" / "projects" / "-tmp-big" / "big.jsonl"
    if target.exists():
        return home
    src = max((CORPUS / "home" / ".claude" / "projects").glob("*/*.jsonl"), key=lambda p: p.stat().st_size)
    lines = [json.loads(x) for x in src.read_text().splitlines() if x.strip()]
    target.parent.mkdir(parents=True, exist_ok=True)
    sid = str(uuid.uuid4())
    size = 0
    t0 = 1_750_000_000
    with open(target, "w") as f:
        for n in itertools.count():
            rec = dict(lines[n % len(lines)])
            rec["uuid"] = f"{n:08d}-0000-4000-8000-{n:012d}"
            rec["parentUuid"] = f"{n - 1:08d}-0000-4000-8000-{n - 1:012d}" if n else None
            rec["sessionId"] = sid
            rec["cwd"] = "/tmp/big"
            rec["timestamp"] = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(t0 + n))
            if isinstance(rec.get("message"), dict) and "id" in rec["message"]:
                rec["message"] = {**rec["message"], "id": f"msg_{n:012d}"}
            if "requestId" in rec:
                rec["requestId"] = f"req_{n:012d}"
            line = json.dumps(rec) + "\n"
            f.write(line)
            size += len(line)
            if size >= mb * 1024 * 1024:
                break
    first = home / ".claude" / "projects" / "-tmp-first" / "first.jsonl"
    first.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(
        CORPUS / "home" / ".claude" / "projects" / "-fixtures-agent-sessions" / "small.jsonl", first
    )
    return home


def _env(home: Path, store: Path) -> dict[str, str]:
    return dict(
        os.environ,
        HOME=str(home),
        CTXKEEP_HOME=str(store),
        CTXKEEP_TRACE="1",
        COLUMNS="200",
        CTXKEEP_EARLY_READER=os.environ.get("CTXKEEP_EARLY_READER", "0"),
    )


def _ctxkeep(*args: str) -> list[str]:
    return [sys.executable, "-P", "-m", "ctxkeep", *args]


def base_store(tree: str, home: Path) -> Path | None:
    """The store a trial starts from: None (a first ingest) for a tree, else (``big``)
    a store of the small first session only, built once (its big file hidden from
    that ingest by a path of its own)."""
    if tree != "big":
        return None
    base = WORK / "base-big"
    if (base / "store.db").exists():
        return base
    first = home / ".claude" / "projects" / "-tmp-first" / "first.jsonl"
    r = subprocess.run(
        _ctxkeep("ingest", "--no-progress", "--path", str(first)),
        env=_env(home, base),
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    return base


def fresh(base: Path | None, name: str) -> Path:
    store = WORK / name
    shutil.rmtree(store, ignore_errors=True)
    if base is not None:
        shutil.copytree(base, store)
    return store


def entries(store: Path) -> tuple[int, int, str]:
    """(entries, watermarks, integrity_check) of ``store``'s ``store.db``."""
    con = sqlite3.connect(f"file:{store}/store.db?mode=ro", uri=True)
    try:
        ok = con.execute("PRAGMA integrity_check").fetchone()[0]
        n = con.execute("SELECT count(*) FROM entries").fetchone()[0]
        w = con.execute("SELECT count(*) FROM watermarks").fetchone()[0]
    finally:
        con.close()
    return n, w, ok


def threads(pid: int) -> list[dict[str, str]]:
    """Each thread's name and masks (hex) from ``/proc/PID/task/*/status``."""
    out = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            text = Path(f"/proc/{pid}/task/{tid}/status").read_text()
        except OSError:
            continue
        row = {"tid": tid}
        for line in text.splitlines():
            k, _, v = line.partition(":")
            if k == "Name" or k in MASKS:
                row[k] = v.strip()
        out.append(row)
    return out


def bits(rows: list[dict[str, str]], sig: int) -> str:
    """The signal's bit in each mask over the threads: ``B3/12`` (blocked in 3 of 12
    threads), ``P`` (pending in a thread), ``S`` (pending in the shared set), ``I``
    (ignored), ``C`` (caught); the names of the threads that block it."""
    bit = 1 << (sig - 1)
    n = len(rows)
    blk = [r for r in rows if int(r.get("SigBlk", "0"), 16) & bit]
    pnd = sum(1 for r in rows if int(r.get("SigPnd", "0"), 16) & bit)
    shd = any(int(r.get("ShdPnd", "0"), 16) & bit for r in rows)
    ign = any(int(r.get("SigIgn", "0"), 16) & bit for r in rows)
    cgt = any(int(r.get("SigCgt", "0"), 16) & bit for r in rows)
    names = sorted({r.get("Name", "?") for r in blk})
    return f"B{len(blk)}/{n} P{pnd} S{int(shd)} I{int(ign)} C{int(cgt)}" + (
        f" blocked in {names}" if names else ""
    )


def _start(start: str):
    """preexec_fn for ``--start``: ``bg`` SIGINT ignored, ``blocked`` SIGINT and
    SIGTERM blocked, ``fg`` nothing."""
    if start == "bg":
        return lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)
    if start == "blocked":
        return lambda: signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    return None


def readers_loop(store: Path, home: Path, stop: threading.Event, k: int) -> None:
    cmds = [
        ["stats"],
        ["search", "the"],
        ["sessions", "--limit", "5"],
        ["compress", "--dry-run"],
    ]
    i = k
    while not stop.is_set():
        subprocess.run(
            _ctxkeep(*cmds[i % len(cmds)]),
            env=_env(home, store),
            capture_output=True,
            check=False,
            timeout=600,
        )
        i += 1


def trial(
    home: Path, base: Path | None, at: str, sig: int, start: str, readers: int, ref: int, group: bool
) -> dict:
    store = fresh(base, f"t-{os.getpid()}")
    stop = threading.Event()
    pool = [
        threading.Thread(target=readers_loop, args=(store, home, stop, k), daemon=True)
        for k in range(readers)
    ]
    for t in pool:
        t.start()
    env = _env(home, store)
    if at == "spawn":  # the signal at the start of a reader process (``start_child``'s window)
        env["CTRLC_AT_SPAWN"] = str(sig)
    t0 = time.monotonic()
    p = subprocess.Popen(
        [sys.executable, "-P", "-c", _RUN],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_start(start),
    )
    before = after = []
    sent_at = None
    if at != "spawn":
        deadline = t0 + float(at)
        while time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.01)
        if p.poll() is None:
            before = threads(p.pid)
            (os.killpg if group else os.kill)(p.pid, sig)
            sent_at = time.monotonic()
            time.sleep(0.05)
            after = threads(p.pid)
    try:
        out, err = p.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    end = time.monotonic()
    stop.set()
    for t in pool:
        t.join()
    name = signal.Signals(sig).name
    lines = [x for x in err.splitlines() if not x.startswith("CTXKEEP-TRACE")]
    spawns = [x for x in err.splitlines() if x.startswith("CTXKEEP-TRACE ingest spawn")]
    if at == "spawn":
        sent_at = next((float(x.split()[-1]) for x in err.splitlines() if x.startswith("CTRLC-SENT")), None)
        lines = [x for x in lines if not x.startswith("CTRLC-SENT")]
    said = any(x.startswith(f"{name}: stopping") for x in lines)
    n, w, ok = entries(store) if (store / "store.db").exists() else (0, 0, "no store.db")
    again = subprocess.run(
        _ctxkeep("ingest", "--no-progress"), env=env, capture_output=True, text=True, check=False
    )
    n2, _, ok2 = entries(store)
    row = {
        "at": at,
        "start": start,
        "signal": name,
        "readers": readers,
        "group": group,
        "rc": p.returncode,
        "said": said,
        "traceback": "Traceback" in err,
        "exit_after_s": round(end - sent_at, 2) if sent_at and at != "spawn" else None,
        "run_s": round(end - t0, 1),
        "entries_after": n,
        "watermarks": w,
        "integrity": ok,
        "again_rc": again.returncode,
        "entries_again": n2,
        "integrity_again": ok2,
        "complete": n2 == ref,
        "spawns": len(spawns),
        "before": bits(before, sig) if before else "",
        "after": bits(after, sig) if after else "",
        "last_line": lines[-1] if lines else "",
    }
    shutil.rmtree(store, ignore_errors=True)
    return row


#: the ingest process: with ``CTRLC_AT_SPAWN`` it sends itself that signal from inside
#: ``prestart.start_child``'s window (SIGINT blocked in the starting thread), once
_RUN = """
import os, signal, subprocess, sys, time
sig = int(os.environ.get("CTRLC_AT_SPAWN") or 0)
if sig:
    from ctxkeep.pipeline import prestart
    real = prestart.subprocess.Popen
    sent = []
    class Popen(real):
        def __init__(self, *a, **k):
            if not sent:
                sent.append(1)
                os.kill(os.getpid(), sig)
                sys.stderr.write(f"CTRLC-SENT {time.monotonic()}\\n")
            super().__init__(*a, **k)
    prestart.subprocess.Popen = Popen
sys.argv = ["ctxkeep", "ingest", "--no-progress"]
from ctxkeep.__main__ import main
main()
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", default="big", help="big (a store, then a new big session) or a HOME dir")
    ap.add_argument("--mb", type=int, default=80, help="the big session's size")
    ap.add_argument("--at", default="1,3,6,10", help="seconds after the start, or 'spawn'")
    ap.add_argument("--signal", default="INT", help="INT, TERM (comma-separated)")
    ap.add_argument("--start", default="fg", help="fg, bg, blocked (comma-separated)")
    ap.add_argument("--readers", default="0", help="concurrent read-only loops (comma-separated)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--group", action="store_true", help="send it to the process group (its readers too)")
    ap.add_argument("--early", default="0", help="CTXKEEP_EARLY_READER for the trials")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    os.environ["CTXKEEP_EARLY_READER"] = a.early
    WORK.mkdir(parents=True, exist_ok=True)
    home = big_home(a.mb) if a.tree == "big" else Path(a.tree)
    base = base_store(a.tree, home)
    # the reference: a run never stopped
    ref_store = fresh(base, "ref")
    t0 = time.monotonic()
    r = subprocess.run(
        _ctxkeep("ingest", "--no-progress"), env=_env(home, ref_store), capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    ref, _, _ = entries(ref_store)
    print(
        f"# reference: {ref:,} entries in {time.monotonic() - t0:.1f} s; load {os.getloadavg()}", flush=True
    )
    shutil.rmtree(ref_store, ignore_errors=True)
    for _ in range(a.repeat):
        for start, sig, readers, at in itertools.product(
            a.start.split(","), a.signal.split(","), a.readers.split(","), a.at.split(",")
        ):
            row = trial(home, base, at, getattr(signal, f"SIG{sig}"), start, int(readers), ref, a.group)
            print(json.dumps(row) if a.json else " ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    print(f"# load {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
