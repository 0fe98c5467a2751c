"""Reads of the SQLite store that ingest, compress and fetch need: which entries and
contents are stored, the watermarks, the tombstones, a content's text, the
quarantined lines of a file."""

from __future__ import annotations

import bisect
import hashlib
import json
import sqlite3
from typing import TYPE_CHECKING

import orjson

from ctxkeep.errors import AmbiguousSession, SessionNotFound, UsageError
from ctxkeep.schema import Watermark
from ctxkeep.sinks.sqlite.ddl import UUID_KEYED_WHERE
from ctxkeep.sinks.sqlite.params import IN_JSON, in_parts, json_list

if TYPE_CHECKING:
    from ctxkeep.schema import Watermark

#: the columns of ``watermarks`` that make a ``schema.Watermark`` (``state`` is JSON text)
WATERMARK_COLUMNS = (
    "path",
    "agent",
    "dev",
    "ino",
    "size",
    "mtime_ns",
    "offset",
    "head_len",
    "head_hash",
    "parser_version",
    "state",
)


def existing_entry_ids(conn: sqlite3.Connection, ids: list[str]) -> set[str]:
    """The subset of ``ids`` (entry ids) already stored in ``entries``."""
    found: set[str] = set()
    for part in in_parts(list(ids)):
        q = f"SELECT entry_id FROM entries WHERE entry_id {IN_JSON}"
        found.update(r[0] for r in conn.execute(q, (json_list(part),)))
    return found


def entry_sessions(conn: sqlite3.Connection, ids: list[str]) -> dict[str, str | None]:
    """``entry_id → session_id`` for the subset of ``ids`` stored in ``entry_rows``."""
    found: dict[str, str | None] = {}
    for part in in_parts(list(ids)):
        q = f"SELECT entry_id, session_id FROM entry_rows WHERE entry_id {IN_JSON}"
        found.update(conn.execute(q, (json_list(part),)).fetchall())
    return found


def uuid_keyed_files(conn: sqlite3.Connection) -> tuple[int, int]:
    """``(files, bytes)`` of the Claude Code files (and OpenClaude's, Cowork's) whose
    entries the store keyed by uuid alone (read before session 17; ``ctxkeep reparse
    --rekey`` moves them to session keys). One search of the partial index
    ``watermarks_uuid_keyed`` (~5 µs when it is empty; a store no writer opened since
    it came scans ``watermarks``: ~1 ms per 500 rows)."""
    got = conn.execute(
        f"SELECT count(*), coalesce(sum(size), 0) FROM watermarks WHERE {UUID_KEYED_WHERE}"
    ).fetchone()
    return int(got[0]), int(got[1])


def archived_entry_ids(conn: sqlite3.Connection, ids: list[str]) -> set[str]:
    """The subset of ``ids`` (entry ids) listed in ``archived`` (moved to the Parquet
    archive by retention)."""
    found: set[str] = set()
    for part in in_parts(list(ids)):
        q = f"SELECT entry_id FROM archived WHERE entry_id {IN_JSON}"
        found.update(r[0] for r in conn.execute(q, (json_list(part),)))
    return found


def existing_contents(conn: sqlite3.Connection, hashes: list[str]) -> dict[str, int]:
    """``content_hash → token_estimate`` (tokens) for the subset of ``hashes`` already
    stored in ``contents``."""
    found: dict[str, int] = {}
    for part in in_parts(hashes):
        q = f"SELECT content_hash, token_estimate FROM contents WHERE content_hash {IN_JSON}"
        found.update((h, t) for h, t in conn.execute(q, (json_list(part),)))
    return found


def tombstoned(conn: sqlite3.Connection) -> dict[str, set[str]]:
    """Purged scopes that ingest must skip: ``{"session": {...}, "project": {...}}``."""
    out: dict[str, set[str]] = {"session": set(), "project": set()}
    for scope, value in conn.execute("SELECT scope, value FROM tombstones"):
        out.setdefault(scope, set()).add(value)
    return out


def load_watermarks(
    conn: sqlite3.Connection, paths: list[str] | None = None, *, state: bool = True
) -> dict[str, Watermark]:
    """The watermarks (``schema.Watermark``) of ``paths`` (default: all), keyed by path.
    ``state=False`` leaves every ``state`` empty without reading it (the stat facts
    only: a no-op ingest's plan, which reads the states of the few files it reads)."""

    cols = WATERMARK_COLUMNS if state else WATERMARK_COLUMNS[:-1]
    sql = f"SELECT {', '.join(cols)} FROM watermarks"
    parts = [None] if paths is None else list(in_parts(list(paths)))
    out = {}
    for part in parts:
        where = "" if part is None else f" WHERE path IN ({','.join('?' * len(part))})"
        for r in conn.execute(sql + where, part or ()):
            row = dict(zip(cols, r, strict=True))
            row["state"] = _state(row["state"]) if state else {}
            out[row["path"]] = Watermark(**row)
    return out


def watermark_facts(conn: sqlite3.Connection, paths: list[str] | None = None) -> dict[str, tuple]:
    """Every watermark's stat facts in one query (with ``paths``: those paths' only,
    through the primary key), as the rows come: ``path ->
    (path, dev, ino, size, mtime_ns, parser_version, waiting)`` (``sources.readers.jsonl.
    facts_unchanged`` compares them with a file's ``stat``; ``waiting``: 1 when bytes
    past the offset are an unended last line not judged yet, ``jsonl.waiting``: its
    state is read only then). No ``Watermark`` per row: a no-op ingest of 25,727 files
    built one each (~0.1 s of its CPU) to compare four numbers."""
    sql = (
        "SELECT path, dev, ino, size, mtime_ns, parser_version, CASE WHEN offset IS NULL OR size IS NULL OR offset >= size THEN 0 "
        "WHEN NOT json_valid(state) THEN 1 "
        "ELSE coalesce(json_extract(state, '$._unended.len') IS NOT size - offset, 1) END FROM watermarks"
    )
    if paths is None:
        return {r[0]: r for r in conn.execute(sql)}
    out: dict[str, tuple] = {}
    for part in in_parts(list(paths)):  # (paths are not JSON-safe: ``params.json_list``)
        out.update(
            (r[0], r) for r in conn.execute(f"{sql} WHERE path IN ({','.join('?' * len(part))})", part)
        )
    return out


def _state(text: str | None) -> dict:
    """A watermark's ``state`` JSON: orjson (a no-op ingest parses every file's state,
    Claude Code's up to ~30 KB each), ``json`` for what orjson refuses (NaN, integers
    beyond 64 bits, which ``json.dumps`` writes)."""
    if not text:
        return {}
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def content_text(conn: sqlite3.Connection, content_hash: str) -> str | None:
    """The full text of a content (its chunks joined in ``seq`` order), or None."""
    rows = conn.execute(
        "SELECT ch.text FROM chunks ch JOIN contents c ON c.content_id = ch.content_id "
        "WHERE c.content_hash = ? ORDER BY ch.seq",
        (content_hash,),
    ).fetchall()
    if not rows:
        return None
    return "".join(r[0] for r in rows)


def quarantined_hashes(conn: sqlite3.Connection, path: str) -> set[str]:
    """SHA-256 hex of the complete raw bytes of every line quarantined for ``path``
    (``quarantine.raw_sha256``, recorded at ingest: the stored ``raw`` is redacted, so
    it cannot be hashed back to the line)."""
    return {
        h
        for (h,) in conn.execute(
            "SELECT raw_sha256 FROM quarantine WHERE path = ? AND raw_sha256 IS NOT NULL", (path,)
        )
    }


def quarantined_redacted(conn: sqlite3.Connection, path: str) -> set[str]:
    """SHA-256 hex of the stored (redacted) bytes of every line quarantined for ``path``
    (of an over-cap line, only its head: no whole line hashes to it): how a line is
    found whose raw hash the quarantine
    does not hold (NULL after a rebuild from the vault's redacted bytes,
    ``sinks.sqlite.requarantine``; or the line was redacted in the file since by
    ``secrets --scrub``)."""
    return {
        hashlib.sha256(bytes(raw)).hexdigest()
        for (raw,) in conn.execute(
            "SELECT raw FROM quarantine WHERE path = ? AND raw IS NOT NULL AND length(raw) > 0",
            (path,),
        )
    }


# ---------------------------------------------------------------- session ids as users see them

#: a session id prefix shorter than this is never shown, nor accepted, however unique
MIN_SESSION_PREFIX = 4
#: an ambiguous prefix's error lists at most this many of the sessions it names
MAX_CANDIDATES = 10
#: sessions one prefix is checked against at most (one index seek each)
MAX_SCAN = 1000


def sessions_starting(conn: sqlite3.Connection, prefix: str, limit: int = MAX_SCAN) -> list[str]:
    """The distinct stored session ids (``entries.session_id``) that start with
    ``prefix``, in sorted order, at most ``limit`` of them. An index skip-scan over
    ``entries_session``: one seek per distinct session, whatever their entry counts."""
    found: list[str] = []
    cur, end = prefix, prefix + "\U0010ffff"
    while len(found) < limit:
        r = conn.execute(
            "SELECT session_id FROM entry_rows INDEXED BY entries_session WHERE "
            "session_id >= ? AND session_id < ? ORDER BY session_id LIMIT 1",
            (cur, end),
        ).fetchone()
        if r is None:
            break
        found.append(r[0])
        cur = r[0] + "\x00"
    return found


def session_parent(conn: sqlite3.Connection, session_id: str) -> str | None:
    """The ``parent_session_id`` of a stored session (a sub-agent, sidechain or fork),
    or None (a top-level session, or no such session)."""
    r = conn.execute(
        "SELECT parent_session_id FROM entry_rows INDEXED BY entries_session WHERE session_id = ? "
        "AND parent_session_id IS NOT NULL LIMIT 1",
        (session_id,),
    ).fetchone()
    return r[0] if r else None


def _common(a: str, b: str) -> int:
    n, m = 0, min(len(a), len(b))
    while n < m and a[n] == b[n]:
        n += 1
    return n


def _prefix_for(x: str, neighbours: list[str], minimum: int) -> str:
    """The shortest prefix of ``x`` (at least ``minimum`` characters) that no id of
    ``neighbours`` starts with; ``x`` whole when it is itself a prefix of one."""
    need = minimum
    for y in neighbours:
        need = max(need, _common(x, y) + 1)
    return x[: min(need, len(x))]


def _is_sub_agent(y: str, x: str, parent: str | None) -> bool:
    """True when ``y`` is a sub-agent of ``x`` that sorts right after it: its id starts
    with ``x/`` and its parent is ``x`` (Claude Code sidechains)."""
    return parent == x and y.startswith(x + "/")


def short_ids(
    ids: list[str], parents: dict[str, str | None] | None = None, minimum: int = MIN_SESSION_PREFIX
) -> dict[str, str]:
    """``session id → the shortest prefix that resolve_session maps back to it``, over
    a complete list of the store's session ids (``parents``: ``session id →
    parent_session_id``, optional).

    The prefix is at least ``minimum`` characters; an id that is a prefix of another id
    is shown whole (an exact id wins in ``resolve_session``). A session's own sub-agents
    ``x/…`` (with ``parents[y] == x``) do not make its prefix longer: resolve_session folds them into
    their parent. A sub-agent is shown as ``<parent's short id>/<rest>`` only when the
    parent's short id holds no ``/`` (``resolve_session`` splits at the first one: a
    sub-agent of a sub-agent is shown as its plain prefix). Compares each id with its nearest sorted neighbours only, so it is
    O(n log n); the prefixes are never ambiguous, if not always the very shortest when
    another session's sub-agents sit between two ids."""
    parents = parents or {}
    s = sorted(set(ids))
    out = {}
    for i, x in enumerate(s):
        near = []
        for step in (-1, 1):
            j = i + step
            while 0 <= j < len(s) and _is_sub_agent(s[j], x, parents.get(s[j])):
                j += step
            if 0 <= j < len(s):
                near.append(s[j])
        out[x] = _prefix_for(x, near, minimum)
    for x, p in list(out.items()):
        parent = parents.get(x)
        if parent in out and _is_sub_agent(x, parent, parent) and "/" not in out[parent]:
            compact = _compact(out[parent], parent, x, p)
            i = bisect.bisect_left(s, compact)
            if not (i < len(s) and s[i].startswith(compact)):
                out[x] = compact
    return out


def _compact(parent_short: str, parent: str, x: str, p: str) -> str:
    """A sub-agent's shown id ``<parent's short id>/<the rest of its prefix p>`` (at
    least ``MIN_SESSION_PREFIX`` characters of the rest: ``fe5e/sidechain-f4a`` for
    ``fe5e1c67-…/sidechain-f4ab2bf6``, ``ses_/side`` for an only sidechain): what
    ``resolve_session`` reads back by resolving the part before the ``/``."""
    start = len(parent) + 1
    return f"{parent_short}/{x[start : start + max(len(p) - start, MIN_SESSION_PREFIX)]}"


def _neighbour(conn: sqlite3.Connection, x: str, below: bool) -> str | None:
    """The nearest stored session id below (or above) ``x`` that is not a sub-agent of
    ``x`` (one that starts ``x/`` and whose ``session_parent`` is ``x``), looking past at
    most ``MAX_SCAN`` ids; None when there is none. The ids are stepped through in one
    recursive statement (``_NEIGHBOUR_SQL``), two index seeks a step: a session with
    hundreds of sidechains took two statements per sidechain from Python (~14 ms a hit on
    a 10 GB store)."""
    op, order = ("<", "DESC") if below else (">", "ASC")
    r = conn.execute(_NEIGHBOUR_SQL.format(op=op, order=order), (x, x + "/", MAX_SCAN)).fetchone()
    y = r[0] if r else None
    if y is None or (y.startswith(x + "/") and session_parent(conn, y) == x):
        return None  # none, or MAX_SCAN sub-agents in a row
    return y


#: rows ``(step, id)`` of ``_neighbour``'s walk from ``?1`` (a session id) through the
#: stored ids ``{op}`` it in ``{order}`` order, while each is a sub-agent of ``?1`` (starts
#: with ``?2``, ``?1/``, and its first ``parent_session_id`` is ``?1``, as
#: ``session_parent`` reads it), at most ``?3`` steps: the last row is the answer
_NEIGHBOUR_SQL = (
    "WITH RECURSIVE walk(step, id) AS ("
    "SELECT 1, (SELECT session_id FROM entry_rows INDEXED BY entries_session WHERE session_id {op} ?1 "
    "ORDER BY session_id {order} LIMIT 1) "
    "UNION ALL SELECT step + 1, (SELECT session_id FROM entry_rows INDEXED BY entries_session "
    "WHERE session_id {op} walk.id ORDER BY session_id {order} LIMIT 1) FROM walk "
    "WHERE step < ?3 AND walk.id IS NOT NULL AND substr(walk.id, 1, length(?2)) = ?2 "
    "AND (SELECT parent_session_id FROM entry_rows INDEXED BY entries_session WHERE session_id = walk.id "
    "AND parent_session_id IS NOT NULL LIMIT 1) = ?1) "
    "SELECT id FROM walk ORDER BY step DESC LIMIT 1"
)


def short_session_ids(conn: sqlite3.Connection, ids) -> dict[str, str]:
    """``session id → its shortest unique prefix`` (as ``short_ids``) for a few ids,
    each compared with its stored neighbours through the ``entries_session`` index (a
    few seeks per id): what search hits and ``show`` print. An id the store does not
    hold is returned whole.

    The nearest neighbours of all the ids are found in one statement (two index seeks
    per id, the ids bound as one JSON array); an id whose neighbour is one of its own
    sub-agents (``x/…``) steps past them one seek at a time (``_neighbour``, up to
    ``MAX_SCAN``); a parent's shown id is looked up once per call, however many of its
    sub-agents are asked (a session with 34,546 sidechains stepped past them all for
    each one)."""
    want = sorted({x for x in ids if x is not None})
    if not want:
        return {}
    near: dict[str, tuple[str | None, str | None]] = {}
    for x, below, above in conn.execute(_NEIGHBOURS_SQL, (json.dumps(want),)):
        near[x] = (below, above)
    parents: dict[str, str] = {}
    return {x: _short_one(conn, x, near.get(x), parents) for x in want}


#: rows ``(id, the nearest stored session id below it, the nearest above)`` for the ids
#: of one JSON array (``short_session_ids``)
_NEIGHBOURS_SQL = (
    "SELECT j.value, "
    "(SELECT session_id FROM entry_rows INDEXED BY entries_session WHERE session_id < j.value "
    "ORDER BY session_id DESC LIMIT 1), "
    "(SELECT session_id FROM entry_rows INDEXED BY entries_session WHERE session_id > j.value "
    "ORDER BY session_id ASC LIMIT 1) FROM json_each(?) j"
)


def _short_one(
    conn: sqlite3.Connection,
    x: str,
    nearest: tuple[str | None, str | None] | None = None,
    parents: dict[str, str] | None = None,
) -> str:
    """The shown id of ``x`` (``short_session_ids``); ``nearest``: its nearest stored
    ids below and above, when already looked up (a sub-agent of ``x`` among them is
    stepped past by ``_neighbour``); ``parents``: parents' shown ids found so far."""
    near = []
    for i, below in enumerate((True, False)):
        y = nearest[i] if nearest is not None else None
        if nearest is None or (y is not None and y.startswith(x + "/")):
            y = _neighbour(conn, x, below)
        if y is not None:
            near.append(y)
    p = _prefix_for(x, near, MIN_SESSION_PREFIX)
    if "/" not in x:  # only a ``<parent>/<rest>`` id is compacted: no parent lookup (it
        return p  # reads every entry of a top-level session: ~1 ms a hit at 500 MB)
    parent = session_parent(conn, x)
    if parent is not None and x.startswith(parent + "/") and _exists(conn, parent):
        if parents is None:
            parents = {}
        if parent not in parents:
            parents[parent] = _short_one(conn, parent, None, parents)
        parent_short = parents[parent]
        if "/" in parent_short:  # resolve_session splits a shown id at its first "/"
            return p
        compact = _compact(parent_short, parent, x, p)
        if not sessions_starting(conn, compact, 1):
            return compact
    return p


def resolve_session(conn: sqlite3.Connection, text: str, *, where: str = "session") -> str:
    """The full session id that ``text`` names: an exact stored session id, or a prefix
    of one (as hits and tables show them, ``short_session_ids``). The one resolver of
    every ``--session`` option and MCP ``sessionId``/``session`` argument.

    A prefix's candidates are the stored session ids that start with it; a candidate
    whose ``parent_session_id`` is also a candidate is folded into its parent (``fe5e``
    names the session ``fe5e1c67-…`` with its ``fe5e1c67-…/sidechain-…`` sub-agents).
    An exact id wins even when it is a prefix of other ids (``aider-0b47469a-1`` and
    ``aider-0b47469a-1549``). A sidechain is also named as shown,
    ``<parent's prefix>/<rest>`` (``fe5e/sidechain-f4a``), when no id starts with that
    text itself.

    Returns the session id. Raises ``SessionNotFound`` (exit 1) when no stored session
    starts with ``text``; ``AmbiguousSession`` (a ``UsageError``, exit 2) when it names
    several sessions, listing them (short id, agent, id), or when it is shorter than
    ``MIN_SESSION_PREFIX`` characters; ``UsageError`` for an empty ``text``.
    """

    r = (text or "").strip() if isinstance(text, str) else str(text or "").strip()
    if not r:
        raise UsageError(
            "the session id is empty", where=where, hint="give an id as `ctxkeep sessions` shows it"
        )
    if _exists(conn, r):
        return r
    found = sessions_starting(conn, r, MAX_SCAN + 1)
    if not found and "/" in r:  # a sub-agent as shown: <parent's short id>/<rest>
        left, right = r.split("/", 1)
        try:
            parent = resolve_session(conn, left, where=where)
        except SessionNotFound:
            parent = None
        if parent is not None:
            r = f"{parent}/{right}"
            found = sessions_starting(conn, r, MAX_SCAN + 1)
    if not found:
        raise SessionNotFound(
            f"no such session {text.strip()}", where=where, hint="see `ctxkeep sessions` for the ids"
        )
    cands = set(found)
    roots = [s for s in found if session_parent(conn, s) not in cands]
    if len(roots) == 1 and len(r) >= MIN_SESSION_PREFIX:
        return roots[0]
    shown = short_session_ids(conn, roots[:MAX_CANDIDATES])
    listed = tuple((shown[s], _agent_of(conn, s), s) for s in roots[:MAX_CANDIDATES])
    more = len(roots) - len(listed)
    total = f"more than {MAX_SCAN}" if len(found) > MAX_SCAN else f"{len(roots):,}"
    names = ", ".join(f"{short} ({agent})" for short, agent, _ in listed) + (
        f", … {more:,} more" if more > 0 else ""
    )
    if len(roots) == 1:
        msg = f"session id prefix {r!r} is too short (it names {names})"
        hint = f"give at least {MIN_SESSION_PREFIX} characters"
    else:
        msg = f"session id prefix {r!r} is ambiguous: {total} sessions start with it: {names}"
        hint = "give more characters of the one you mean"
    raise AmbiguousSession(msg, where=where, hint=hint, candidates=listed, total=len(roots))


def _exists(conn: sqlite3.Connection, session_id: str) -> bool:
    return (
        conn.execute(
            "SELECT 1 FROM entry_rows INDEXED BY entries_session WHERE session_id = ? LIMIT 1", (session_id,)
        ).fetchone()
        is not None
    )


def _agent_of(conn: sqlite3.Connection, session_id: str) -> str:
    r = conn.execute(
        "SELECT agent FROM entry_rows INDEXED BY entries_session WHERE session_id = ? LIMIT 1", (session_id,)
    ).fetchone()
    return r[0] if r else "?"


def session_family(conn: sqlite3.Connection, session_id: str) -> list[str]:
    """``session_id`` and the stored sessions under it whose id starts with
    ``<session_id>/`` (Claude Code sidechains, ``claude_code.py``), sorted: what a
    search filter on one session covers. (Sub-agents with ids of their own, found only
    by ``parent_session_id``, need a full scan and are left to ``show`` and purge.)"""
    return sorted({session_id, *sessions_starting(conn, session_id + "/")})


def _roots(conn: sqlite3.Connection, having: str, params: dict) -> list[str]:
    """Root sessions (``coalesce(parent_session_id, session_id)``), sorted, whose
    entries grouped by root satisfy ``having``."""
    return [
        r[0]
        for r in conn.execute(
            "SELECT coalesce(parent_session_id, session_id) AS root FROM entries "
            f"WHERE coalesce(parent_session_id, session_id) IS NOT NULL GROUP BY root {having} ORDER BY root",
            params,
        )
    ]


def root_sessions_of_agent(conn: sqlite3.Connection, agent: str) -> list[str]:
    """Root sessions (a sub-agent counts with its parent) holding an entry of
    ``agent``, sorted."""
    return _roots(conn, "HAVING max(agent = :a) = 1", {"a": agent})


def root_sessions_before(conn: sqlite3.Connection, cutoff: str) -> list[str]:
    """Root sessions whose newest entry time (``ts``; when it has none, when it was
    ingested) is before ``cutoff`` (ISO-8601 UTC text, compared as stored), sorted."""
    return _roots(conn, "HAVING coalesce(max(ts), max(ingested_at)) < :cut", {"cut": cutoff})


def absolute_project_dirs(conn: sqlite3.Connection) -> list[str]:
    """The distinct stored ``project_dir`` values that are POSIX absolute paths."""
    return [
        r[0] for r in conn.execute("SELECT DISTINCT project_dir FROM entries WHERE project_dir LIKE '/%'")
    ]


def token_estimates(conn: sqlite3.Connection, hashes: list[str], methods: tuple[str, ...]) -> dict[str, int]:
    """``{content_hash: token_estimate}`` of the ``contents`` among ``hashes`` counted
    with one of ``methods`` (``contents.token_method``) and holding an estimate."""
    marks = ",".join("?" * len(methods))
    out: dict[str, int] = {}
    for part in in_parts(hashes, 500):
        q = (
            f"SELECT content_hash, token_estimate FROM contents WHERE content_hash IN "
            f"({','.join('?' * len(part))}) AND token_method IN ({marks}) AND token_estimate IS NOT NULL"
        )
        out.update(conn.execute(q, [*part, *methods]))
    return out


def user_messages(
    conn: sqlite3.Connection, entry_ids: list[str]
) -> list[tuple[str, str | None, int | None, str | None]]:
    """``(entry_id, ts, source_offset, content_hash)`` of the user messages (role
    ``user``, kind ``message``) among ``entry_ids``, in no set order."""
    rows: list = []
    for part in in_parts(entry_ids, 500):
        q = (
            "SELECT entry_id, ts, source_offset, content_hash FROM entries "
            f"WHERE role = 'user' AND kind = 'message' AND entry_id IN ({','.join('?' * len(part))})"
        )
        rows += conn.execute(q, part).fetchall()
    return rows


def has_project_under(conn: sqlite3.Connection, project_dir: str) -> bool:
    """Whether some stored session's project is ``project_dir`` or a folder below it
    (``paths.under_sql`` over the ``projects`` table)."""
    from ctxkeep.paths import under_sql

    sql, args = under_sql("project_dir", project_dir)
    return conn.execute(f"SELECT 1 FROM projects WHERE {sql} LIMIT 1", args).fetchone() is not None


def known_paths(conn: sqlite3.Connection) -> set[str]:
    """Every file path the store knows: its watermarks' and the vault's files' (a rows
    document's ``<db>#session=<id>`` as it is). A table an old store lacks: skipped."""
    out: set[str] = set()
    for table in ("watermarks", "vault_files"):
        try:
            out |= {r[0] for r in conn.execute(f"SELECT path FROM {table}")}
        except sqlite3.Error:
            continue
    return out
