"""Hook-path benchmark (issue 26 target 1; a script that prints figures, not a test,
not collected by pytest).

Side by side in one run, with the load average at the start and the end:

- ``python -c pass``: the interpreter's own start, the floor of any Python command;
- the hook: ``ctxkeep hook claude-code precompact`` with Claude Code's JSON on stdin,
  after 10 new lines were appended to its transcript: the wall seconds until it
  returns to the agent (target ≤ 0.1 s), and the seconds from its start until the
  new lines are stored (searchable: their entries and FTS rows commit in one
  transaction; polled every 5 ms on a read-only SQLite connection; target ≤ 1.5 s);
- ``ctxkeep ingest --path FILE`` after 10 new lines were appended: wall seconds, CPU
  seconds (user + system) and peak RSS (``wait4``'s ``ru_maxrss`` of the process;
  targets ≤ 0.4 s, ≤ 150 MB). On a shared machine the wall time follows the load; the
  CPU time and the RSS hardly do: compare those.

Each checkout (this one, and with ``--baseline DIR`` (repeatable) other checkouts with
their own ``.venv``, each labelled by its folder's name, e.g. the session-start build:
``git worktree add /work/wt-base <sha> && (cd /work/wt-base && uv sync --all-extras)``)
gets its own store in a temp dir, first
filled with the corpus (``$CTXKEEP_CORPUS`` or ``../shared/corpus``; its ``home`` as
``HOME``, read only), so the hook and ``--path`` ingest write into a store of the
corpus's size, with its DuckDB file. The session files are handmade Claude Code
lines with fresh ids (``tests/session_lines.py``) in the temp dir: each run writes a
new session of 10 lines, ingests it once, appends 10 more and measures. The
checkouts' runs alternate (run 1 of each, run 2 of each, ...), so a load change hits
them alike. Their bytecode is compiled first, as an installed ctxkeep has it. Each
command runs as the agents run it: the checkout's ``.venv/bin/ctxkeep`` script.

Usage::

    .venv/bin/python tests/bench/bench_hook.py [--runs 10] [--baseline /work/wt-base ...]
"""

from __future__ import annotations

import argparse
import compileall
import datetime as dt
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from session_lines import claude_lines  # noqa: E402

CORPUS = Path(os.environ.get("CTXKEEP_CORPUS") or (ROOT.parent / "shared" / "corpus")).resolve()
NEW_LINES = 10


def clean_env(**extra: str) -> dict:
    """This environment without Prefect settings or agent-dir overrides, plus ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PREFECT_") and k not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "CTXKEEP_HOME")
    }
    env.update({"CTXKEEP_IDLE_SECONDS": "0", **extra})
    return env


def run_measured(cmd: list[str], env: dict, stdin: str | None = None) -> tuple[float, float, float]:
    """(wall seconds, peak RSS MB, CPU seconds: user + system) of one whole process
    (``wait4``); raises SystemExit when it fails."""
    t0 = time.perf_counter()
    p = subprocess.Popen(
        cmd,
        env=env,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    if stdin is not None:
        p.stdin.write(stdin.encode())
        p.stdin.close()
    _, status, ru = os.wait4(p.pid, 0)
    secs = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}): {err[-1500:]}")
    return secs, ru.ru_maxrss / 1024, ru.ru_utime + ru.ru_stime


def stored(store: Path, sid: str) -> int:
    """Entries of session ``sid`` in the store (0 without a store)."""
    try:
        conn = sqlite3.connect(f"file:{store / 'store.db'}?mode=ro", uri=True)
    except sqlite3.Error:
        return 0
    try:
        return conn.execute("SELECT count(*) FROM entries WHERE session_id = ?", (sid,)).fetchone()[0]
    except sqlite3.Error:
        return 0
    finally:
        conn.close()


def wait_worker(root: Path, store: Path) -> None:
    """Wait until the checkout's hook worker (if it has one) is idle."""
    code = (
        "import sys\nfrom pathlib import Path\n"
        "try:\n    from ctxkeep.hooks import worker\nexcept ImportError:\n    sys.exit(0)\n"
        "if hasattr(worker, 'wait_idle'):\n    worker.wait_idle(Path(sys.argv[1]), 120)\n"
    )
    subprocess.run([str(root / ".venv" / "bin" / "python"), "-P", "-c", code, str(store)], check=True)


class Checkout:
    """One checkout's store and session files in ``work``."""

    def __init__(self, label: str, root: Path, work: Path) -> None:
        self.label, self.root = label, root
        self.exe = str(root / ".venv" / "bin" / "ctxkeep")
        self.store = work / f"store-{label}"
        self.sessions = work / f"sessions-{label}"
        self.sessions.mkdir(parents=True)
        # every cache in the temp dir: HOME is the corpus, which nothing may write
        self.env = clean_env(
            HOME=str(CORPUS / "home"),
            CTXKEEP_HOME=str(self.store),
            CTXKEEP_CACHE_DIR=str(work / f"cache-{label}"),
            XDG_CACHE_HOME=str(work / f"xdg-cache-{label}"),
        )
        self.n = 0

    def fill(self) -> None:
        """The corpus into the store (what a user's store holds before the hook fires)."""
        subprocess.run([self.exe, "ingest", "--no-progress"], env=self.env, check=True, capture_output=True)

    def session(self) -> tuple[str, Path, list[str]]:
        """A new session with ``NEW_LINES`` lines ingested; returns (id, path, the
        ``NEW_LINES`` lines still to append)."""
        self.n += 1
        sid = str(uuid.uuid4())
        start = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC) + dt.timedelta(minutes=self.n)
        lines = claude_lines(sid, 2 * NEW_LINES, start, word=f"hookbench{self.n}")
        path = self.sessions / f"{sid}.jsonl"
        path.write_text("\n".join(lines[:NEW_LINES]) + "\n")
        subprocess.run(
            [self.exe, "ingest", "--path", str(path), "--json"], env=self.env, check=True, capture_output=True
        )
        wait_worker(self.root, self.store)
        assert stored(self.store, sid) == NEW_LINES, f"{self.label}: the first lines were not stored"
        return sid, path, lines[NEW_LINES:]

    def hook(self) -> tuple[float, float, float]:
        """(seconds until the hook returned, seconds until the new lines were stored,
        the hook process's CPU seconds)."""
        sid, path, rest = self.session()
        with path.open("a") as f:
            f.write("\n".join(rest) + "\n")
        payload = json.dumps(
            {
                "session_id": sid,
                "transcript_path": str(path),
                "hook_event_name": "PreCompact",
                "trigger": "auto",
            }
        )
        t0 = time.perf_counter()
        returned, _, cpu = run_measured(
            [self.exe, "hook", "claude-code", "precompact"], self.env, stdin=payload
        )
        while stored(self.store, sid) < 2 * NEW_LINES:
            if time.perf_counter() - t0 > 120:
                raise SystemExit(
                    f"{self.label}: the new lines were not stored within 120 s (see {self.store}/hooks.log)"
                )
            time.sleep(0.005)
        searchable = time.perf_counter() - t0
        wait_worker(self.root, self.store)
        return returned, searchable, cpu

    def ingest_path(self) -> tuple[float, float, float]:
        """(wall seconds, peak RSS MB, CPU seconds) of ``ingest --path FILE`` of
        ``NEW_LINES`` new lines."""
        sid, path, rest = self.session()
        with path.open("a") as f:
            f.write("\n".join(rest) + "\n")
        got = run_measured([self.exe, "ingest", "--path", str(path), "--json"], self.env)
        assert stored(self.store, sid) == 2 * NEW_LINES, f"{self.label}: ingest --path stored too little"
        return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument(
        "--baseline",
        type=Path,
        action="append",
        default=[],
        help="another checkout (with .venv) to run side by side (repeatable)",
    )
    a = ap.parse_args()
    if not (CORPUS / "home").is_dir():
        raise SystemExit(f"no corpus at {CORPUS}/home: set CTXKEEP_CORPUS")
    roots = [("this", ROOT)]
    for base in (b.resolve() for b in a.baseline):
        if not (base / ".venv" / "bin" / "ctxkeep").exists():
            raise SystemExit(
                f"no {base}/.venv/bin/ctxkeep: run `uv sync --all-extras` in the baseline checkout"
            )
        roots.append((base.name, base))
    load0 = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="ctxkeep-bench-hook-"))
    try:
        for _, root in roots:
            compileall.compile_dir(root / "ctxkeep", quiet=1)
        cos = [Checkout(label, root, work) for label, root in roots]
        print(
            f"load average at the start {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} (2 cores); {a.runs} runs each"
        )
        for c in cos:
            c.fill()
        floor = [run_measured([sys.executable, "-c", "pass"], clean_env()) for _ in range(a.runs)]
        got: dict[str, dict[str, list]] = {c.label: {"hook": [], "ingest": []} for c in cos}
        for _ in range(a.runs):
            for c in cos:
                got[c.label]["hook"].append(c.hook())
                got[c.label]["ingest"].append(c.ingest_path())

        width = 48 + max(len(c.label) for c in cos)

        def row(name: str, vals: list[float], unit: str, target: str) -> None:
            print(
                f"{name:<{width}}{statistics.median(vals):>9.3f}{min(vals):>9.3f}{max(vals):>9.3f} {unit:<3} {target}"
            )

        print(f"\n{'':<{width}}{'median':>9}{'best':>9}{'worst':>9}")
        row("python -c pass (wall)", [f[0] for f in floor], "s", "")
        row("python -c pass (CPU)", [f[2] for f in floor], "s", "")
        row("python -c pass (peak RSS)", [f[1] for f in floor], "MB", "")
        for c in cos:
            g = got[c.label]
            row(f"[{c.label}] hook returns to the agent", [h[0] for h in g["hook"]], "s", "≤ 0.1 s")
            row(f"[{c.label}] hook returns to the agent (CPU)", [h[2] for h in g["hook"]], "s", "")
            row(
                f"[{c.label}] new lines searchable after the hook fired",
                [h[1] for h in g["hook"]],
                "s",
                "≤ 1.5 s",
            )
            row(
                f"[{c.label}] ingest --path FILE, {NEW_LINES} new lines (wall)",
                [i[0] for i in g["ingest"]],
                "s",
                "≤ 0.4 s",
            )
            row(
                f"[{c.label}] ingest --path FILE, {NEW_LINES} new lines (CPU)",
                [i[2] for i in g["ingest"]],
                "s",
                "",
            )
            row(
                f"[{c.label}] ingest --path FILE, {NEW_LINES} new lines (peak RSS)",
                [i[1] for i in g["ingest"]],
                "MB",
                "≤ 150 MB",
            )
        load1 = os.getloadavg()
        print(f"load average at the end {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} (2 cores)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
