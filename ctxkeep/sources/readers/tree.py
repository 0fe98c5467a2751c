"""A session kept as a tree of JSON files (sst/opencode's ``storage/``: the session
file, ``message/<session id>/*.json``, ``part/<message id>/*.json``) as one document
for the vault (``sinks.vault``): the files in order, each after a header line

    ``\\x00ctxkeep-tree\\x00<path relative to storage>\\x00<mtime_ns>\\n``

followed by the file's bytes as they are. A JSON file holds no raw NUL byte (RFC 8259:
control characters are escaped in strings), so the header never occurs inside a file,
and the bytes need no length: the vault redacts the document in place (a file's
length changes) and the files still split at the headers. ``unbundle`` reads it back.
"""

from __future__ import annotations

from pathlib import Path

MARK = b"\x00ctxkeep-tree\x00"


def bundle(storage: Path, files: list[Path]) -> bytes:
    """The document of ``files`` (under ``storage``; one that vanished is left out)."""
    out = []
    for p in files:
        try:
            data = p.read_bytes()
            mtime = p.stat().st_mtime_ns
        except OSError:
            continue
        try:
            rel = p.relative_to(storage)
        except ValueError:
            rel = Path(p.name)
        out.append(MARK + str(rel).encode("utf-8", "surrogateescape") + b"\x00" + str(mtime).encode() + b"\n")
        out.append(data)
    return b"".join(out)


def unbundle(data: bytes) -> list[tuple[str, int, bytes]]:
    """``(relative path, mtime_ns, bytes)`` of each file of a ``bundle`` document.
    Raises ValueError when ``data`` is not one."""
    if data and not data.startswith(MARK):
        raise ValueError("not a ctxkeep tree document")
    out = []
    for piece in data.split(MARK)[1:]:
        head, sep, body = piece.partition(b"\n")
        rel, sep2, mtime = head.partition(b"\x00")
        if not sep or not sep2 or not mtime.isdigit():
            raise ValueError("a damaged ctxkeep tree header")
        name = rel.decode("utf-8", "surrogateescape")
        if name.startswith("/") or ".." in Path(name).parts:
            raise ValueError(f"a tree path outside its storage: {name!r}")
        out.append((name, int(mtime), body))
    return out


__all__ = ["MARK", "bundle", "unbundle"]
