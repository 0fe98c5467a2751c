"""The names of the files an HTML/Markdown export writes (``render.site``), here so that
a purge (``maintenance.exports_held``) can find the pages of the sessions it removes.

Page names are ``<session id, characters outside [A-Za-z0-9._-] as _, at most 60>-<8
hex of the SHA-256 of the agent and id>.<ext>`` (sidechain ids hold ``/``; two ids may
differ only in such characters); ``MARKER`` lists what an export wrote into its DEST:
``{"schema": 1, "pages": [file names]}``."""

from __future__ import annotations

import hashlib
import re

#: export format → page suffix
FORMATS = {"html": ".html", "markdown": ".md"}
#: the file naming what ctxkeep wrote into a DEST
MARKER = ".ctxkeep-export.json"


def page_name(agent: str, session_id: str, ext: str) -> str:
    """A session's page file name (see the module docstring)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", session_id)[:60].strip("._") or "session"
    tag = hashlib.sha256(f"{agent}\0{session_id}".encode()).hexdigest()[:8]
    return f"{safe}-{tag}{ext}"
