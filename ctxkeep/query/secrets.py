"""What redaction took out of the store, never the values: ``secrets_report(conn)``.

The store records each redacted value as its marker ``[REDACTED:<kind>]`` in the
stored text (``transforms.redact``), so per-entry counts by kind are read from the
markers of the entry's text: the texts holding a marker are found through the FTS
index (``fts_words`` tokens ``redacted``; a full chunk scan without a usable index,
as ``stats.redaction_counts`` does), read whole, and joined to the entries that
reference them. An entry counts each marker of its text; a text shared by several
entries counts for each (each is a place the value reached an agent).

Quarantined lines (``quarantine.raw``, redacted before they were stored) count per
agent and file; they have no session or time of their own (``first_seen`` is when
ingest met them).
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

from ctxkeep.query.stats import MARKER_RE

#: what a person should do about a value that reached an agent (the values are gone
#: from the store, not from the provider)
ROTATE_NOTE = (
    "A redacted value was still sent to the agent and its model provider, and may sit in the "
    "agent's own session files, their backups and anything that synced or uploaded them: "
    "rotate (revoke and reissue) every credential of these kinds that was real, starting "
    "with the sessions listed; `ctxkeep secrets --scrub` removes the values from the agents' "
    "files (a verified backup of each file keeps them until you delete it)."
)


def _marked_contents(conn: sqlite3.Connection) -> dict[int, Counter]:
    """content_id → Counter of the marker kinds in its whole text."""
    try:
        ids = [
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT ch.content_id FROM fts_words f JOIN chunks ch ON ch.chunk_id = f.rowid "
                "WHERE fts_words MATCH 'text : redacted'"
            )
        ]
    except sqlite3.DatabaseError:
        ids = [
            r[0]
            for r in conn.execute("SELECT DISTINCT content_id FROM chunks WHERE instr(text, '[REDACTED') > 0")
        ]
    out: dict[int, Counter] = {}
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        joined: dict[int, list[str]] = {}
        for cid, text in conn.execute(
            f"SELECT content_id, text FROM chunks WHERE content_id IN ({','.join('?' * len(part))}) "
            "ORDER BY content_id, seq",
            part,
        ):
            joined.setdefault(cid, []).append(text)
        for cid, parts in joined.items():
            c = Counter(m.group(1) or "unknown" for m in MARKER_RE.finditer("".join(parts)))
            if c:
                out[cid] = c
    return out


def _span(d: dict, ts: str | None) -> None:
    if ts:
        if d["first_seen"] is None or ts < d["first_seen"]:
            d["first_seen"] = ts
        if d["last_seen"] is None or ts > d["last_seen"]:
            d["last_seen"] = ts


def _bucket() -> dict:
    return {"values": 0, "entries": 0, "first_seen": None, "last_seen": None}


def secrets_report(conn: sqlite3.Connection, *, top_sessions: int = 20) -> dict:
    """Counts of redacted values, never the values.

    Returns ``{"total": n values in entries (counted per entry), "entries": n entries
    holding one, "text_values": n values counted once per distinct stored text (as
    ``stats`` counts them), "texts": n distinct texts holding one,
    "kinds": {kind: {"values", "entries", "sessions", "first_seen", "last_seen"}},
    "agents": {agent: {"values", "entries", "sessions", "first_seen", "last_seen",
    "kinds": {kind: n}}}, "dates": {YYYY-MM-DD (UTC): {kind: n}}, "sessions": [{"agent",
    "session_id", "project_dir", "values", "entries", "kinds": {kind: n}, "first_seen",
    "last_seen", "files": [agent session file paths]}] (most values first, at most
    ``top_sessions``), "sessions_total": n, "quarantine": {"values", "lines", "kinds",
    "agents": {agent: n}, "files": [paths]}, "vault": ``_vault_counts``, "note":
    ``ROTATE_NOTE`` or ""}``.
    Times are the entries' ISO-8601 UTC ``ts``; an entry without one counts but moves
    no first/last seen."""
    marked = _marked_contents(conn)
    kinds: dict[str, dict] = {}
    agents: dict[str, dict] = {}
    dates: dict[str, Counter] = {}
    sessions: dict[tuple[str, str], dict] = {}
    kind_sessions: dict[str, set] = {}
    total = n_entries = 0
    ids = list(marked)
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        rows = conn.execute(
            "SELECT r.content_id, v.agent, v.session_id, v.ts, v.project_dir, v.source_path "
            "FROM entry_rows r JOIN entries v ON v.rowid = r.rowid "
            f"WHERE r.content_id IN ({','.join('?' * len(part))})",
            part,
        ).fetchall()
        for cid, agent, sid, ts, project, path in rows:
            c = marked[cid]
            n = sum(c.values())
            total += n
            n_entries += 1
            a = agents.setdefault(agent, {**_bucket(), "sessions": set(), "kinds": Counter()})
            a["values"] += n
            a["entries"] += 1
            a["sessions"].add(sid)
            a["kinds"].update(c)
            _span(a, ts)
            s = sessions.setdefault(
                (agent, sid),
                {
                    "agent": agent,
                    "session_id": sid,
                    "project_dir": project,
                    **_bucket(),
                    "kinds": Counter(),
                    "files": set(),
                },
            )
            s["values"] += n
            s["entries"] += 1
            s["kinds"].update(c)
            if path:
                s["files"].add(path)
            _span(s, ts)
            if ts:
                dates.setdefault(ts[:10], Counter()).update(c)
            for k, v in c.items():
                b = kinds.setdefault(k, _bucket())
                b["values"] += v
                b["entries"] += 1
                _span(b, ts)
                kind_sessions.setdefault(k, set()).add((agent, sid))
    for k, b in kinds.items():
        b["sessions"] = len(kind_sessions[k])
    for a in agents.values():
        a["sessions"] = len(a["sessions"])
        a["kinds"] = dict(a["kinds"].most_common())
    ranked = sorted(sessions.values(), key=lambda s: (-s["values"], s["last_seen"] or ""))
    for s in ranked:
        s["kinds"] = dict(s["kinds"].most_common())
        s["files"] = sorted(s["files"])
    q_kinds: Counter = Counter()
    q_agents: Counter = Counter()
    q_files: set[str] = set()
    q_lines = 0
    for agent, path, raw in conn.execute(
        "SELECT agent, path, raw FROM quarantine WHERE instr(raw, CAST('[REDACTED' AS BLOB)) > 0"
    ):
        c = Counter(
            m.group(1) or "unknown" for m in MARKER_RE.finditer(bytes(raw).decode("utf-8", "replace"))
        )
        if c:
            q_lines += 1
            q_kinds.update(c)
            q_agents[agent or "unknown"] += sum(c.values())
            if path:
                q_files.add(path)
    return {
        "total": total,
        "entries": n_entries,
        # the same values counted once per distinct stored text, as `stats` counts them
        "text_values": sum(sum(c.values()) for c in marked.values()),
        "texts": len(marked),
        "kinds": dict(sorted(kinds.items(), key=lambda kv: -kv[1]["values"])),
        "agents": dict(sorted(agents.items())),
        "dates": {d: dict(c.most_common()) for d, c in sorted(dates.items())},
        "sessions": ranked[:top_sessions],
        "sessions_total": len(ranked),
        "quarantine": {
            "values": sum(q_kinds.values()),
            "lines": q_lines,
            "kinds": dict(q_kinds.most_common()),
            "agents": dict(q_agents),
            "files": sorted(q_files),
        },
        "vault": _vault_counts(conn),
        "note": ROTATE_NOTE if total or q_lines else "",
    }


def _vault_counts(conn: sqlite3.Connection) -> dict:
    """``{"values": n, "agents": {agent: n}}``: the values the vault replaced in the raw
    bytes it holds (``sinks.vault.manifest.figures``: each occurrence, in the newest
    generation of each file, as ``vault status`` and ``vault restore`` count them). They
    differ from the entries' count: a line can hold a value twice (Crush keeps a tool
    result's text in its ``metadata`` too: one value in the entry, two in the row), and
    lines and rows no entry is made of hold some."""
    from ctxkeep.sinks.vault import manifest

    try:
        figs = manifest.figures(conn)
    except sqlite3.OperationalError:  # a store from before the vault
        figs = {}
    agents = {a: sum(f["redactions"].values()) for a, f in sorted(figs.items()) if f["redactions"]}
    return {"values": sum(agents.values()), "agents": agents}


def _vault_files_with_values(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """``(path, agent)`` of the files whose newest vault generation counted a redacted
    value in the file's raw bytes (``vault_generations.redactions``, a JSON object
    kind → count). A file whose records the store files under another file's entries
    (a copy of a session: the same records, deduplicated) is found only here
    (newuser18 F6). A scrubbed file keeps its generation's counts (its redacted bytes
    are the vault's own), so it is read once more and found clean. No vault tables (an
    old store): none."""
    try:
        rows = conn.execute(
            "SELECT f.path, f.agent, g.redactions FROM vault_files f JOIN vault_generations g "
            "ON g.vfile_id = f.vfile_id AND g.gen = (SELECT max(gen) FROM vault_generations "
            "WHERE vfile_id = f.vfile_id) WHERE g.redactions IS NOT NULL AND g.redactions NOT IN ('', '{}')"
        ).fetchall()
    except sqlite3.OperationalError:
        return []
    out = []
    for path, agent, red in rows:
        try:
            counts = json.loads(red)
        except ValueError:
            continue
        if isinstance(counts, dict) and any(isinstance(n, int) and n > 0 for n in counts.values()):
            out.append((path, agent or "unknown"))
    return out


def secret_files(conn: sqlite3.Connection, paths: list[Path] | None = None) -> list[tuple[str, str]]:
    """``(path, agent)`` of the agents' session files holding a redacted value: the
    ``source_path`` of the entries whose text holds a marker, the files of redacted
    quarantined lines and the files whose newest vault generation counted values in
    their bytes (``_vault_files_with_values``), sorted; ``paths``: those files alone,
    each named one listed whether or not it holds a value (agent ``unknown`` when the
    store knows none: the scrub detects it), so a named file is always answered."""
    ids = list(_marked_contents(conn))
    found: dict[str, str] = {}
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        for path, agent in conn.execute(
            "SELECT DISTINCT v.source_path, v.agent FROM entry_rows r JOIN entries v ON v.rowid = r.rowid "
            f"WHERE r.content_id IN ({','.join('?' * len(part))})",
            part,
        ):
            if path:
                found.setdefault(path, agent)
    for path, agent in conn.execute(
        "SELECT DISTINCT path, agent FROM quarantine WHERE instr(raw, CAST('[REDACTED' AS BLOB)) > 0"
    ):
        if path:
            found.setdefault(path, agent or "unknown")
    for path, agent in _vault_files_with_values(conn):
        found.setdefault(path, agent)
    if paths:
        by_real = {str(Path(p).resolve()): (p, a) for p, a in found.items()}
        named: dict[str, str] = {}
        for p in paths:
            real = str(Path(p).expanduser().resolve())
            path, agent = by_real.get(real, (str(Path(p).expanduser().absolute()), "unknown"))
            named.setdefault(path, agent)
        found = named
    return sorted(found.items())
