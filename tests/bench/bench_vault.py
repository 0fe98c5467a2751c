"""Benchmark (prints figures side by side, not a test): the vault (issue 27).

1. ingest of a scaled tree (``/work/shared/tools/scale_corpus.py --unique-text``) with
   the vault off (``CTXKEEP_VAULT=0``) and on, alternating (``--runs``, medians; beside
   them the same with the entry texts redacted in calls of their own, as before session
   14: ``CTXKEEP_ONE_CALL=0``, ``--no-baseline`` leaves them out), each a
   whole ``ctxkeep ingest`` process into a fresh store: wall, CPU (user + sys of the
   process and its reader process), peak RSS (the child's ``ru_maxrss``), vault bytes,
   the load average; target: on ≤ 1.15× off, peak RSS ≤ 700 MB;
2. vault bytes / raw bytes on the corpus (target ≤ 0.25×), with plain zstd-3 and
   zstd-19 of each whole file beside it (what compression alone reaches);
3. a Gemini CLI document (the corpus's real session, its messages cycled) rewritten
   after each of 100 messages and ingested each time: packs + manifest rows against
   the final document (target ≤ 2×);
4. ``vault restore`` of the largest session of the scaled tree (target ≤ 0.5 s);
5. ``reparse`` of the scaled tree against its fresh ingest (target ≤ 1.2×);
6. a forked Claude Code session: what the fork adds to the vault, append captures kept
   whole (as before) and cut into pieces (now).

    uv run python tests/bench/bench_vault.py --mb 200     # the lead's run
    uv run python tests/bench/bench_vault.py --mb 2       # a check that it works
    uv run python tests/bench/bench_vault.py --tree /tmp/tree200 --runs 2 --only ingest,corpus
    uv run python tests/bench/bench_vault.py --tree /tmp/tree200 --runs 2 --only ingest,restore \\
        --baseline /work/wt-int      # this code and a baseline checkout side by side
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
CORPUS_HOME = ROOT.parent / "shared" / "corpus" / "home"
SCALE = ROOT.parent / "shared" / "tools" / "scale_corpus.py"
GEMINI = next(iter(sorted((CORPUS_HOME / ".gemini").rglob("session-2025-12-03T08-28-*.json"))), None)


def _child(args: list[str], env: dict, cpu: list | None = None) -> tuple[float, float, str]:
    """Run ``python -m ctxkeep ARGS``: (wall s, peak RSS MB, stdout). ``cpu``: gets
    the process's user and system CPU seconds appended (``wait4``: with its reader
    process, which it waits for)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(
        [sys.executable, "-P", "-m", "ctxkeep", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )
    out = p.stdout.read().decode()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"ctxkeep {' '.join(args)} failed: {out[-500:]}")
    if cpu is not None:
        cpu += [ru.ru_utime, ru.ru_stime]
    return wall, ru.ru_maxrss / 1024, out


def _env(home: Path, **extra: str) -> dict:
    env = dict(os.environ, HOME=str(home), CTXKEEP_IDLE_SECONDS="0", **extra)
    env.pop("CTXKEEP_HOME", None)
    return env


def _du(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.exists() else 0


def _tree_bytes(home: Path) -> int:
    return sum(f.stat().st_size for f in home.rglob("*") if f.is_file())


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def _code(env: dict, checkout: Path | None) -> dict:
    """``env`` running ``checkout``'s ``ctxkeep`` (None: this one), put first on the path."""
    if checkout is not None:
        env = dict(env, PYTHONPATH=os.pathsep.join(filter(None, [str(checkout), env.get("PYTHONPATH")])))
    return env


def ingest_on_off(
    tmp: Path, tree: Path, runs: int = 1, baseline: bool = True, checkout: Path | None = None
) -> dict:
    """Ingest ``tree`` with the vault off and on, alternating, ``runs`` times each, each
    a whole process into a fresh store; prints wall, CPU (user + sys: the machine is
    shared, CPU time is the steadier figure), peak RSS and vault bytes of each run with
    the load average, then the medians' ratios. ``baseline``: each also with the entry
    texts redacted in calls of their own (``CTXKEEP_ONE_CALL=0``, before session 14;
    now they are redacted in the call that redacts the raw lines, ``stable_ids.rekey``)."""
    configs = [("vault off", "0", "1"), ("vault on", "1", "1")]
    if checkout is not None:  # another checkout's code: same flags
        configs = [("base off", "0", "1"), *configs[:1], ("base on", "1", "1"), *configs[1:]]
    elif baseline:
        configs = [("off 2 calls", "0", "0"), *configs[:1], ("on 2 calls", "1", "0"), *configs[1:]]
    rows: dict[str, list] = {name: [] for name, _, _ in configs}
    print(f"\n1. ingest of {_tree_bytes(tree) / 1e6:,.1f} MB ({tree}), vault off / on alternating")
    print(
        f"   {'':11} {'wall s':>8} {'CPU s':>7} {'user s':>7} {'sys s':>6} {'RSS MB':>7} {'vault MB':>9}  load"
    )
    for i in range(runs):
        for name, flag, one in configs:
            store = tmp / f"store-{'b' if name.startswith('base') else ''}{flag}{one}-{i}"
            cpu: list = []
            env = _code(
                _env(tree, CTXKEEP_VAULT=flag, CTXKEEP_ONE_CALL=one),
                checkout if name.startswith("base") else None,
            )
            wall, rss, _ = _child(["ingest", "--home", str(store)], env, cpu)
            v = _du(store / "vault")
            rows[name].append((wall, cpu[0] + cpu[1], cpu[0], cpu[1], rss, v))
            print(
                f"   {name:11} {wall:8.2f} {cpu[0] + cpu[1]:7.2f} {cpu[0]:7.2f} {cpu[1]:6.2f} {rss:7.0f} "
                f"{v / 1e6:9.2f}  {_load()}"
            )
            if name not in ("vault on", "base on") or i < runs - 1:
                shutil.rmtree(store)

    def med(name: str, k: int) -> float:
        xs = sorted(r[k] for r in rows[name])
        return xs[len(xs) // 2]

    on_off = [med("vault on", k) / med("vault off", k) for k in (0, 1)]
    rss = max(r[4] for r in rows["vault on"])
    raw = _tree_bytes(tree)
    print(
        f"   on / off (medians of {runs}): {on_off[1]:.3f}x CPU, {on_off[0]:.3f}x wall (target <= 1.15); "
        f"peak RSS {rss:.0f} MB (target <= 700); vault {rows['vault on'][-1][5] / raw:.3f}x the tree"
    )
    if checkout is not None:
        base = [med("base on", k) / med("base off", k) for k in (0, 1)]
        print(
            f"   baseline {checkout}: on / off {base[1]:.3f}x CPU, {base[0]:.3f}x wall; "
            f"this / baseline, CPU s: on {med('vault on', 1):.2f} / {med('base on', 1):.2f}, "
            f"off {med('vault off', 1):.2f} / {med('base off', 1):.2f}; wall s: on {med('vault on', 0):.2f} / "
            f"{med('base on', 0):.2f}, off {med('vault off', 0):.2f} / {med('base off', 0):.2f}"
        )
    elif baseline:
        two = [med("on 2 calls", k) / med("off 2 calls", k) for k in (0, 1)]
        print(
            f"   2 calls (texts redacted apart, before): on / off {two[1]:.3f}x CPU, {two[0]:.3f}x wall; "
            f"one call against 2 calls, CPU s: on {med('vault on', 1):.2f} / {med('on 2 calls', 1):.2f}, "
            f"off {med('vault off', 1):.2f} / {med('off 2 calls', 1):.2f}"
        )
    out = {
        "fresh_ingest_s": med("vault on", 0),
        "fresh_ingest_cpu": med("vault on", 1),
        "store": tmp / f"store-11-{runs - 1}",
    }
    if checkout is not None:  # the baseline's own store and figures, for its reparse
        out["base"] = {
            "fresh_ingest_s": med("base on", 0),
            "fresh_ingest_cpu": med("base on", 1),
            "store": tmp / f"store-b11-{runs - 1}",
        }
    return out


def corpus_ratio(tmp: Path) -> None:
    import zstandard

    home = tmp / "corpus-home"
    shutil.copytree(CORPUS_HOME, home)
    store = tmp / "corpus-store"
    _child(["ingest", "--home", str(store)], _env(home))
    conn = sqlite3.connect(store / "store.db")
    # a database agent's sessions are held as rows documents named "DB#session=ID":
    # the file on disk is the database, counted once
    held = sorted({r[0].split("#session=", 1)[0] for r in conn.execute("SELECT path FROM vault_files")})
    conn.close()
    raw_held = sum(Path(p).stat().st_size for p in held)
    raw_all = _tree_bytes(home)
    vault = _du(store / "vault")
    z3 = sum(len(zstandard.ZstdCompressor(level=3).compress(Path(p).read_bytes())) for p in held)
    z19 = sum(len(zstandard.ZstdCompressor(level=19).compress(Path(p).read_bytes())) for p in held)
    print("\n2. vault bytes / raw bytes on the corpus")
    print(
        f"   files the vault holds: {len(held)} ({raw_held / 1e6:.2f} MB); the whole corpus {raw_all / 1e6:.2f} MB"
    )
    print(
        f"   vault {vault / 1e6:.3f} MB = {vault / raw_held:.3f}x the files it holds, {vault / raw_all:.3f}x the corpus"
    )
    print(
        f"   beside: each file zstd-3 {z3 / raw_held:.3f}x, zstd-19 {z19 / raw_held:.3f}x (target <= 0.25x)"
    )


def rewrites(tmp: Path) -> None:
    from ctxkeep.pipeline.engine import run_ingest
    from ctxkeep.sources.contract import DiscoveryContext

    if GEMINI is None:
        print("\n3. skipped: the corpus's Gemini session is missing")
        return
    src = json.loads(GEMINI.read_bytes())
    home = tmp / "doc-home"
    p = home / ".gemini/tmp/bench/chats/session-2026-01-01T00-00-bench000.json"
    p.parent.mkdir(parents=True)
    store = tmp / "doc-store"
    msgs = []
    t0 = time.perf_counter()
    os.environ["CTXKEEP_IDLE_SECONDS"] = "0"
    for i in range(100):
        msgs.append(dict(src["messages"][i % len(src["messages"])], id=f"m{i}"))
        doc = dict(src, lastUpdated=f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}Z", messages=msgs)
        p.write_text(json.dumps(doc, indent=2))
        run_ingest(store, ctx=DiscoveryContext(home=home, env={}), agents=["gemini-cli"])
    wall = time.perf_counter() - t0
    final = p.stat().st_size
    conn = sqlite3.connect(store / "store.db")
    lists = conn.execute(
        "SELECT coalesce(sum(length(chunks)), 0), count(*) FROM vault_generations"
    ).fetchone()
    objs = conn.execute("SELECT count(*) FROM vault_objects").fetchone()[0]
    conn.close()
    packs = _du(store / "vault")
    rows = 100 * lists[1] + 60 * objs
    total = packs + lists[0] + rows
    print("\n3. a Gemini CLI document rewritten after each of 100 messages (100 ingests)")
    print(f"   final document {final / 1e3:,.1f} KB; {lists[1]} generations")
    print(
        f"   packs {packs / 1e3:,.1f} KB + chunk lists {lists[0] / 1e3:,.1f} KB + rows ~{rows / 1e3:,.1f} KB = "
        f"{total / final:.2f}x the final document (target <= 2x); the 100 versions whole: "
        f"{sum(range(1, 101)) * final / 100 / 1e6:,.1f} MB; 100 ingests {wall:.1f} s"
    )


#: the corpus's Claude Code session a fork is made of (``forks``)
FORKED = CORPUS_HOME / ".claude/projects/-Users-chip-dev-ai-music/d3ad4cdc-5657-435d-98fa-0035d53e383d.jsonl"


def forks(tmp: Path) -> None:
    """Identical bytes in two files: a Claude Code session and its fork (the first 80 %
    of its lines, then 40 lines of its own), ingested into a store beside the session
    alone; the fork's cost in vault bytes with append captures kept whole (as before
    pieces: ``capture.SEG_MIN`` set past any capture) and cut into pieces (now), for a
    fork that copies the history byte for byte and for one whose copied lines carry
    its own ``sessionId`` (an agent that rewrites them)."""
    from ctxkeep.pipeline.engine import run_ingest
    from ctxkeep.sinks.vault import capture
    from ctxkeep.sources.contract import DiscoveryContext

    os.environ["CTXKEEP_IDLE_SECONDS"] = "0"
    src = FORKED.read_bytes()
    lines = src.splitlines(keepends=True)
    sid = FORKED.stem
    fork_id = "f0f0f0f0-1111-4222-8333-444455556666"
    own = [
        json.dumps(
            {
                "type": "user",
                "sessionId": fork_id,
                "uuid": f"00000000-0000-4000-8000-{i:012d}",
                "timestamp": f"2026-01-01T00:00:{i % 60:02d}Z",
                "message": {"role": "user", "content": f"the fork's own turn {i}: " + "lorem " * (20 + i)},
            }
        ).encode()
        + b"\n"
        for i in range(40)
    ]
    history = lines[: len(lines) * 4 // 5]
    kinds = {
        "byte for byte": b"".join(history + own),
        "sessionId rewritten": b"".join(ln.replace(sid.encode(), fork_id.encode()) for ln in history)
        + b"".join(own),
    }
    print(
        f"\n6. a forked Claude Code session ({len(src) / 1e3:,.0f} KB; the fork: 80 % of it, then 40 lines)"
    )
    print(f"   {'fork':20} {'fork KB':>8} {'captures':>22} {'vault +KB':>10} {'x fork':>7}")
    seg_min = capture.SEG_MIN
    try:
        for kind, fork in kinds.items():
            for label, size in (("whole (before)", 1 << 62), ("pieces (now)", seg_min)):
                capture.SEG_MIN = size
                got = []
                for with_fork in (False, True):
                    home = tmp / f"fork-home-{len(got)}-{label[:5]}-{kind[:4]}"
                    p = home / FORKED.relative_to(CORPUS_HOME)
                    p.parent.mkdir(parents=True)
                    p.write_bytes(src)
                    if with_fork:
                        p.with_name(f"{fork_id}.jsonl").write_bytes(fork)
                    store = home.with_name(home.name + "-store")
                    run_ingest(store, ctx=DiscoveryContext(home=home, env={}), agents=["claude-code"])
                    got.append(_du(store / "vault"))
                extra = got[1] - got[0]
                print(
                    f"   {kind:20} {len(fork) / 1e3:8,.0f} {label:>22} {extra / 1e3:10,.1f} {extra / len(fork):7.3f}"
                )
    finally:
        capture.SEG_MIN = seg_min


def restore_and_reparse(
    tmp: Path,
    tree: Path,
    fresh_s: float,
    store: Path,
    fresh_cpu: float = 0.0,
    base: dict | None = None,
    checkout: Path | None = None,
) -> None:
    """``vault restore`` of the largest session (in this process, and as a whole
    ``ctxkeep`` process) and ``reparse`` of the whole store against its fresh ingest;
    with ``base`` (``ingest_on_off``'s baseline figures and store), the same with the
    ``checkout``'s code, side by side (the lead's quiet run)."""
    conn = sqlite3.connect(store / "store.db")
    sid = conn.execute(
        "SELECT e.session_id FROM entry_rows e JOIN files f ON f.file_id = e.file_id JOIN vault_files v "
        "ON v.path = f.path GROUP BY 1 ORDER BY sum(length(e.entry_id)) DESC LIMIT 1"
    ).fetchone()[0]
    conn.close()
    from ctxkeep.maintenance.vault import vault_restore

    t0 = time.perf_counter()
    r = vault_restore(store, sid, to=tmp / "restored", user_home=tree)
    t_api = time.perf_counter() - t0
    runs = [("this", store, None, fresh_s, fresh_cpu)]
    if base is not None:
        runs.append(("baseline", base["store"], checkout, base["fresh_ingest_s"], base["fresh_ingest_cpu"]))
    size = sum(f["bytes"] for f in r["files"])
    print(f"\n4. vault restore of the largest session ({len(r['files'])} file(s), {size / 1e6:.2f} MB)")
    print(f"   in-process {t_api:.3f} s (this code)")
    for label, st, code, _, _ in runs:
        walls = []
        for k in range(3):
            wall, _, _ = _child(
                ["vault", "restore", sid, "--to", str(tmp / f"restored-{label}-{k}"), "--home", str(st)],
                _code(_env(tree), code),
            )
            walls.append(wall)
        print(
            f"   {label:8} whole `ctxkeep vault restore` process, best of 3: {min(walls):.3f} s "
            f"(target <= 0.5 s)  load {_load()}"
        )
    print("\n5. reparse of the scaled tree from the vault against its fresh ingest (vault on)")
    for label, st, code, f_s, f_cpu in runs:
        cpu: list = []
        wall, rss, _ = _child(["reparse", "--home", str(st)], _code(_env(tree), code), cpu)
        print(
            f"   {label:8} fresh ingest {f_s:.2f} s; reparse {wall:.2f} s = {wall / f_s:.2f}x wall (target <= 1.2x); "
            f"CPU s {f_cpu:.2f} / {sum(cpu):.2f} = {sum(cpu) / f_cpu:.2f}x; peak RSS {rss:.0f} MB  load {_load()}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=200, help="size of the scaled tree (MB)")
    ap.add_argument("--runs", type=int, default=3, help="vault off / on ingests of the tree, alternating")
    ap.add_argument(
        "--tree",
        type=Path,
        help="an existing scaled tree to ingest (read only, e.g. /tmp/tree200) instead of --mb",
    )
    ap.add_argument(
        "--only",
        default="ingest,corpus,rewrites,restore,forks",
        help="the sections to run (comma-separated: ingest, corpus, rewrites, restore, forks)",
    )
    ap.add_argument(
        "--baseline",
        type=Path,
        help="another checkout (e.g. /work/wt-int: main at 1271e7c) whose ingests, restore and reparse "
        "run beside this code's, alternating (its ctxkeep first on PYTHONPATH)",
    )
    ap.add_argument(
        "--no-baseline",
        action="store_true",
        help="leave out the ingests with the entry texts redacted in calls of their own (CTXKEEP_ONE_CALL=0)",
    )
    args = ap.parse_args()
    only = set(args.only.split(","))
    print(f"bench_vault: load average {_load()} at start (1/5/15 min; 2 cores)")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        tree = args.tree
        if tree is None and only & {"ingest", "restore"}:
            tree = tmp / "tree"
            subprocess.run(
                [sys.executable, str(SCALE), "--mb", str(args.mb), "--unique-text", str(tree)],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        r = (
            ingest_on_off(tmp, tree, args.runs, not args.no_baseline, args.baseline)
            if only & {"ingest", "restore"}
            else None
        )
        if "corpus" in only:
            corpus_ratio(tmp)
        if "rewrites" in only:
            rewrites(tmp)
        if "restore" in only and r is not None:
            restore_and_reparse(
                tmp,
                tree,
                r["fresh_ingest_s"],
                r["store"],
                r["fresh_ingest_cpu"],
                r.get("base"),
                args.baseline,
            )
        if "forks" in only:
            forks(tmp)
    print(f"\nload average {_load()} at the end")


if __name__ == "__main__":
    main()
