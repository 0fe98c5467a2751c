"""Transform: source entries into the frames ``sqlite_store.load_batch`` takes, with
the dedup against the store and against the groups of this run still in flight."""

from __future__ import annotations

import collections
from collections.abc import Callable

import polars as pl

from ctxkeep.paths import under_expr
from ctxkeep.schema import entry_id
from ctxkeep.sinks import parquet as archive
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sources.contract import Batch
from ctxkeep.transforms.chunk import chunks_frame
from ctxkeep.transforms.normalize import contents_frame, entries_frame, usage_frame
from ctxkeep.transforms.tokens import estimate_tokens


class InFlight:
    """What earlier groups of a run hold that may not be committed yet: their new
    ``entries`` (entry ids) and ``contents`` (``content_hash → token_estimate``,
    tokens), the union of one generation per transformed group (``add``).

    With ``committed`` (a callable: how many of the groups ``add`` recorded, in
    order, the writer has committed so far; ``writer.Writer.stored``), ``prune``
    forgets the generations of committed groups: the store holds them, and every
    store read that starts after the commit returned sees them. Called by the
    transform before its first store read, so what it forgets is visible to every
    read that follows; without it a run holds every new entry id and content hash it
    met (~170 bytes per entry: ~170 MB at 1M entries)."""

    def __init__(self, committed: Callable[[], int] | None = None) -> None:
        self.entries: set[str] = set()
        self.contents: dict[str, int] = {}
        self.committed = committed
        #: the session of each new entry keyed by a uuid alone (``twins``); set (and
        #: ``legacy`` true) once a group held one, or the store holds such files
        self.uuid_sessions: dict[str, str | None] = {}
        #: whether the store holds files keyed by uuid alone (None: not asked yet)
        self.legacy: bool | None = None
        #: (entry ids, content hashes) added per group, oldest first
        self.generations: collections.deque[tuple[list[str], list[str]]] = collections.deque()
        #: generations pruned so far (the index of ``generations[0]``)
        self.pruned = 0

    def add(self, entry_ids: list[str], contents: dict[str, int]) -> None:
        """Record one group's new entry ids and contents (``hash → tokens``) as its
        generation."""
        self.entries.update(entry_ids)
        self.contents.update(contents)
        if self.committed is not None:
            self.generations.append((entry_ids, list(contents)))

    def prune(self) -> None:
        """Forget the generations of the groups committed by now (``committed()``).
        A generation's ids are its own (a group adds only entries and contents no
        group before it added), so removing them removes nothing another holds."""
        if self.committed is None:
            return
        done = self.committed()
        while self.generations and self.pruned < done:
            ids, hashes = self.generations.popleft()
            self.entries.difference_update(ids)
            if self.uuid_sessions:
                for i in ids:
                    self.uuid_sessions.pop(i, None)
            for h in hashes:
                self.contents.pop(h, None)
            self.pruned += 1


class Precomputed:
    """Token estimates and chunk rows of contents computed ahead, by a reader process
    (``reader_process.read_in_process``), kept until a group's transform takes them.
    A content's chunk rows may come without its token estimate (``cut``: a first
    ingest's early reader cuts chunks and index terms but loads no BPE tables,
    ``reader_process`` ``--precompute chunks``): its tokens are counted here."""

    def __init__(self) -> None:
        self.tokens: dict[str, tuple[int, str]] = {}
        #: contents whose chunk rows are held without their token estimate
        self.cut: set[str] = set()
        self.chunks: list[pl.DataFrame] = []

    def add(self, contents: pl.DataFrame, chunks: pl.DataFrame) -> None:
        """``contents``: content_hash, token_estimate, token_method (or content_hash
        alone: chunks cut ahead, tokens not counted); ``chunks``: their ``chunks_frame``
        rows. A content already held is skipped (a reader process that forgot what it
        sent, ``reader_process.KNOWN_MAX``, may send it again: held twice, ``take``
        would join its chunk rows twice)."""
        if self.tokens or self.cut:
            held = [h in self.tokens or h in self.cut for h in contents["content_hash"].to_list()]
            if any(held):
                dup = contents.filter(pl.Series(held, dtype=pl.Boolean))["content_hash"]
                contents = contents.filter(~pl.Series(held, dtype=pl.Boolean))
                chunks = chunks.filter(~pl.col("content_hash").is_in(dup.implode()))
        if "token_estimate" not in contents.columns:
            self.cut.update(contents["content_hash"].to_list())
        else:
            self.tokens.update(
                zip(
                    contents["content_hash"].to_list(),
                    zip(
                        contents["token_estimate"].to_list(), contents["token_method"].to_list(), strict=False
                    ),
                    strict=False,
                )
            )
        self.chunks.append(chunks)

    def forget(self, hashes: list[str]) -> None:
        """Drop what is held for ``hashes``: the contents of a group's entries, stored or
        known from that group on, so never taken later. Without it what a reader process
        counted for contents the store already held (a repeated tool input, a re-read
        file) stayed for the whole run, and each ``take`` joined all of it (issue 26:
        the ingest process of a 2.5 GB tree grew from 330 to 760 MB over the run)."""
        gone = {h for h in hashes if h in self.tokens or h in self.cut}
        if not gone:
            return
        for h in gone:
            self.tokens.pop(h, None)
        self.cut -= gone
        allc = pl.concat(self.chunks, how="vertical") if len(self.chunks) > 1 else self.chunks[0]
        self.chunks = [allc.filter(~pl.col("content_hash").is_in(list(gone)))]

    def _rows(self, hashes: list[str]) -> pl.DataFrame:
        """The chunk rows held for ``hashes`` (each held), in their order then ``seq``
        (``chunks_frame``'s order for these contents); taken rows are dropped."""
        allc = pl.concat(self.chunks, how="vertical") if len(self.chunks) > 1 else self.chunks[0]
        idx = pl.DataFrame(
            {"content_hash": hashes, "_i": list(range(len(hashes)))},
            schema={"content_hash": pl.String, "_i": pl.Int64},
        )
        rows = (
            idx.join(allc, on="content_hash", how="inner")
            .sort("_i", "seq", maintain_order=True)
            .select(allc.columns)
        )
        self.chunks = [allc.join(idx, on="content_hash", how="anti")]
        return rows

    def take(self, hashes: list[str]) -> tuple[list[int], list[str], pl.DataFrame] | None:
        """``(counts, methods, chunk rows)`` for ``hashes``, exactly as
        ``estimate_tokens`` and ``chunks_frame`` make them for these contents in this
        order; None unless every hash was counted ahead. Taken rows are dropped."""
        if not hashes or any(h not in self.tokens for h in hashes):
            return None
        counts = [self.tokens[h][0] for h in hashes]
        methods = [self.tokens[h][1] for h in hashes]
        rows = self._rows(hashes)
        for h in hashes:
            del self.tokens[h]
        return counts, methods, rows

    def fill(self, fresh: pl.DataFrame) -> tuple[list[int], list[str], pl.DataFrame] | None:
        """``(counts, methods, chunk rows)`` of the contents ``fresh`` (content_hash,
        text; distinct hashes), exactly as ``estimate_tokens`` and ``chunks_frame`` make
        them for these contents in this order: those held taken (``take``), the tokens
        of those held without them (``cut``) counted here, the others computed here (a
        reader process that was the slower side sent some chunks without them:
        ``reader_process.precompute_now``). None when none is held."""
        hashes = fresh["content_hash"].to_list()
        if not hashes or not (self.tokens or self.cut):
            return None
        held = [h in self.tokens or h in self.cut for h in hashes]
        if not any(held):
            return None
        counted = [h in self.tokens for h in hashes]
        if all(counted):
            return self.take(hashes)
        texts = fresh["text"].to_list()
        # tokens: counted ahead, else here (``estimate_tokens`` is per text)
        rc, rm = estimate_tokens([t for t, k in zip(texts, counted, strict=True) if not k])
        it_rest = iter(zip(rc, rm, strict=True))
        pairs = [self.tokens.pop(h) if k else next(it_rest) for h, k in zip(hashes, counted, strict=True)]
        self.cut.difference_update(hashes)
        if all(held):
            return [c for c, _ in pairs], [m for _, m in pairs], self._rows(hashes)
        mask = pl.Series(held, dtype=pl.Boolean)
        got = self._rows([h for h, k in zip(hashes, held, strict=True) if k])
        rest = fresh.filter(~mask)
        pos = pl.DataFrame(
            {"content_hash": hashes, "_i": list(range(len(hashes)))},
            schema={"content_hash": pl.String, "_i": pl.Int64},
        )
        # the rest with the index terms the reader sent with the others (the same columns)
        rows = pl.concat([got, chunks_frame(rest, index_terms="vocab" in got.columns)], how="vertical")
        rows = rows.join(pos, on="content_hash", how="left").sort("_i", "seq", maintain_order=True).drop("_i")
        return [c for c, _ in pairs], [m for _, m in pairs], rows


def transform_batch(
    conn,
    batch: Batch,
    tombs: dict[str, set[str]],
    seen: InFlight | None = None,
    frame: pl.DataFrame | None = None,
    pre: Precomputed | None = None,
    legacy: bool = False,
    skipped: dict | None = None,
) -> dict:
    """Turn a source batch into the frames ``sqlite_store.load_batch`` takes.

    Entries already stored are dropped (dedup across runs and files), as are entries
    of purged sessions/projects (tombstones) and entries retention archived. Token
    estimates are computed only for contents the store does not hold yet.

    ``seen`` holds what earlier groups of this run returned and a writer thread may
    not have committed yet (``engine.extract_transform``): those entries count as
    stored and those contents as known, exactly as if the earlier groups were
    committed, so a content new in two groups gets its chunks once. This call adds
    its new entries and contents to ``seen``.

    ``frame``: ``entries_frame(batch.entries)`` when it was built already (from the
    rows a reader process normalized: ``reader_process.read_in_process``);
    ``batch.entries`` is then ignored. ``pre``: token estimates and chunk rows that
    reader process computed; used when it holds every new content, else they are
    computed here. ``legacy``: the batch holds entries of a file its store keyed by
    uuid alone (``twins``: their records under the other key are dropped too).
    ``skipped``: what the tombstones dropped is added to it (``drop_tombstoned``).

    Returns ``{"entries", "contents", "chunks", "usage": pl.DataFrame}``
    (``transform_entries``).
    """
    if seen is not None:  # before the store reads below: they see what it forgets
        seen.prune()
    frame = entries_frame(batch.entries) if frame is None else frame
    met = frame["content_hash"].drop_nulls()  # all known after this group (``pre.forget``)
    frame = drop_tombstoned(frame, tombs, {} if skipped is None else skipped)
    existing = sqlite_store.existing_entry_ids(conn, frame["entry_id"].to_list()) if frame.height else set()
    if frame.height:  # entries retention moved to the Parquet archive stay there
        existing |= archive.archived_ids(conn, frame["entry_id"].to_list())
    if seen is not None and seen.entries and frame.height:
        existing |= seen.entries.intersection(frame["entry_id"].to_list())
    new = frame.filter(~pl.col("entry_id").is_in(list(existing))) if existing else frame
    if new.height:
        twin = twins(conn, frame, new, seen, legacy)
        if twin:
            new = new.filter(~pl.col("entry_id").is_in(twin))
    out = transform_entries(conn, frame, new, seen, pre)
    if pre is not None and pre.tokens and met.len():
        pre.forget(met.to_list())
    return out


def drop_tombstoned(frame: pl.DataFrame, tombs: dict[str, set[str]], skipped: dict) -> pl.DataFrame:
    """``frame`` (an ``entries_frame``) without the entries a tombstone covers: a
    ``project`` dir (the dir or below, ``under_expr``) first, then a ``session`` id
    (the session or its sub-agents, ``parent_session_id``). What each tombstone
    dropped is added to ``skipped``: ``{(scope, value): [entries, {session ids}]}``
    (``writer.add_skipped`` sums them over a run; the ingest summary's ``tombstoned``).
    Nothing is counted when the store holds no tombstone."""
    # each mask computed once (the path test is the costly part), the counts from it
    for proj in sorted(tombs.get("project", ())):
        if not frame.height:
            break
        hit = frame.select(under_expr(pl.col("project_dir"), proj).fill_null(False)).to_series()
        n = int(hit.sum())
        if n:
            _count_into(skipped, ("project", proj), n, frame["session_id"].filter(hit))
            frame = frame.filter(~hit)
    if tombs.get("session") and frame.height:
        ids = list(tombs["session"])
        own = frame["session_id"].is_in(ids)
        hit = own | frame["parent_session_id"].fill_null("").is_in(ids)
        if hit.any():
            dropped = frame.filter(hit).with_columns(
                pl.when(own.filter(hit))
                .then(pl.col("session_id"))
                .otherwise(pl.col("parent_session_id"))
                .alias("_tomb")
            )
            for sid, part in dropped.group_by("_tomb"):
                _count_into(skipped, ("session", str(sid[0])), part.height, part["session_id"])
            frame = frame.filter(~hit)
    return frame


def _count_into(skipped: dict, key: tuple[str, str], n: int, sessions: pl.Series) -> None:
    slot = skipped.setdefault(key, [0, set()])
    slot[0] += n
    slot[1].update(s for s in sessions.unique().to_list() if s)


def twins(
    conn, frame: pl.DataFrame, new: pl.DataFrame, seen: InFlight | None = None, legacy: bool = False
) -> list[str]:
    """The entry ids of ``new`` (the rows of ``frame``, an ``entries_frame``, not
    stored) whose record is
    stored, or comes earlier in ``new``, under its other key: Claude Code's parser
    keys a record ``<session>:<uuid>`` in a file read first now and by its uuid alone
    in a file a store read before session 17 (``claude_code.legacy_ids``), so in such
    a store the same session continued in a new file (the old one's lines repeated,
    same ``sessionId``) would store its repeated records twice. A twin counts only
    in the same session: a fork (the same uuids under another session) keeps its
    copy. Also against ``seen`` (groups not committed yet; it keeps the session of
    each uuid-keyed entry it holds, ``InFlight.uuid_sessions``).

    Nothing is computed unless the store holds a file keyed by uuid alone
    (``uuid_keyed_files``: asked once per run with ``seen``, else per call) or
    ``legacy`` (the group holds such a file: ``engine``): a store made since session
    17 pays one query per run. Else two SHA-256 per Claude Code entry (which key it
    has) and one lookup of the other keys."""
    if seen is not None and legacy:
        seen.legacy = True
    if not legacy:
        known = seen.legacy if seen is not None else None
        if known is None:
            known = sqlite_store.uuid_keyed_files(conn)[0] > 0
            if seen is not None:
                seen.legacy = known
        if not known:
            return []
    rows = frame.filter(pl.col("agent").is_in(sqlite_store.UUID_KEYED_AGENTS))
    if not rows.height:
        return []
    # an entry's ``part`` (not a frame column) is its place among its line's entries
    # (``claude_code._message_entries``); a guess that is wrong matches neither key
    rows = rows.with_columns(
        pl.int_range(pl.len()).over("source_path", "source_offset").alias("part")
    ).filter(pl.col("native_id").is_not_null() & pl.col("entry_id").is_in(new["entry_id"].implode()))
    if not rows.height:
        return []
    ids: list[str] = []
    sessions: list[str | None] = []
    others: list[str] = []
    keyed_by_uuid: list[bool] = []
    for i, a, n, s, p in rows.select("entry_id", "agent", "native_id", "session_id", "part").iter_rows():
        by_uuid, by_session = entry_id(a, n, p), entry_id(a, f"{s}:{n}", p)  # the parser's two keys
        if i not in (by_uuid, by_session):
            continue  # keyed by its line (or another scheme): no twin
        ids.append(i)
        sessions.append(s)
        others.append(by_session if i == by_uuid else by_uuid)
        keyed_by_uuid.append(i == by_uuid)
    stored = sqlite_store.entry_sessions(conn, others) if others else {}
    pos = {i: k for k, i in enumerate(ids)}
    held = seen.uuid_sessions if seen is not None else {}
    out: list[str] = []
    for k, (i, o, s, u) in enumerate(zip(ids, others, sessions, keyed_by_uuid, strict=True)):
        if o in stored:
            twin = stored[o] == s
        elif seen is not None and o in seen.entries:
            # a session-keyed twin names its session; a uuid-keyed one's is kept aside
            twin = u or (o in held and held[o] == s)
        else:
            twin = pos.get(o, k) < k and sessions[pos[o]] == s  # earlier in this frame
        if twin:
            out.append(i)
    if seen is not None:
        drop = set(out)
        held.update(
            (i, s) for i, s, u in zip(ids, sessions, keyed_by_uuid, strict=True) if u and i not in drop
        )
    return out


def transform_entries(
    conn, frame: pl.DataFrame, new: pl.DataFrame, seen: InFlight | None = None, pre: Precomputed | None = None
) -> dict:
    """The frames ``sqlite_store.load_batch`` takes for the ``new`` entries of
    ``frame`` (both ``entries_frame`` rows): their token estimates (tokens, from the
    store or ``seen`` for contents known there, else from ``pre`` or
    ``estimate_tokens``), the contents the store does not hold and their chunk rows,
    and the usage rows of all of ``frame``. Adds the new entries and contents to
    ``seen``.

    Returns ``{"entries": new + token_estimate (Int64), "contents": content_hash,
    bytes, text, token_estimate, token_method, "chunks": chunks_frame rows, "usage":
    usage_frame rows}`` (pl.DataFrame each).
    """
    contents = contents_frame(new)
    known = (
        sqlite_store.existing_contents(conn, contents["content_hash"].to_list()) if contents.height else {}
    )
    if seen is not None and seen.contents and contents.height:
        sc = seen.contents
        known.update((h, sc[h]) for h in contents["content_hash"].to_list() if h in sc)
    fresh = contents.filter(~pl.col("content_hash").is_in(list(known))) if known else contents
    ahead = pre.fill(fresh.select("content_hash", "text")) if pre is not None else None
    if ahead is not None:
        counts, methods, chunks = ahead
    elif fresh.height:  # (bpe-openai counts under the GIL: no thread beside the chunks)
        counts, methods = estimate_tokens(fresh["text"].to_list())
        chunks = chunks_frame(fresh)
    else:  # nothing new to count
        counts, methods, chunks = [], [], chunks_frame(fresh)
    fresh = fresh.with_columns(
        pl.Series("token_estimate", counts, dtype=pl.Int64),
        pl.Series("token_method", methods, dtype=pl.String),
    )
    tok = pl.concat(
        [
            fresh.select("content_hash", "token_estimate"),
            pl.DataFrame(
                {"content_hash": list(known), "token_estimate": list(known.values())},
                schema={"content_hash": pl.String, "token_estimate": pl.Int64},
            ),
        ]
    )
    new = (
        new.drop("token_estimate")
        .join(tok, on="content_hash", how="left", maintain_order="left")
        .with_columns(pl.col("token_estimate").fill_null(0))
    )
    if seen is not None:
        seen.add(new["entry_id"].to_list(), dict(zip(fresh["content_hash"].to_list(), counts, strict=False)))
    return {
        "entries": new,
        "contents": fresh,
        "chunks": chunks,
        "usage": usage_frame(frame),
    }


def drop_written(frames: dict, written: InFlight) -> dict:
    """``frames`` (``transform_batch``'s) without the entries and contents (and their
    chunk rows) that ``written`` holds, then adds what is left to ``written``.

    For groups transformed apart (the parts of a Prefect flow run, each deduplicated
    against the store and within itself only) that one writer stores in order: a
    group then stores what it would store had it been transformed after the groups
    before it (a content new in two parts gets its chunks once, with the same token
    estimate: ``estimate_tokens`` is per text)."""
    entries, contents, chunks = frames["entries"], frames["contents"], frames["chunks"]
    done = [i for i in entries["entry_id"].to_list() if i in written.entries]
    if done:
        entries = entries.filter(~pl.col("entry_id").is_in(done))
    gone = [h for h in contents["content_hash"].to_list() if h in written.contents]
    if gone:
        contents = contents.filter(~pl.col("content_hash").is_in(gone))
        chunks = chunks.filter(~pl.col("content_hash").is_in(gone))
    written.add(
        entries["entry_id"].to_list(),
        dict(zip(contents["content_hash"].to_list(), contents["token_estimate"].to_list(), strict=False)),
    )
    return dict(frames, entries=entries, contents=contents, chunks=chunks)
