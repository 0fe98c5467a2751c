"""Hatchling build hook: compiles ``ctxkeep/sinks/sqlite/_ckrank.c`` (the ``ck_bm25``
FTS5 ranking function, ``ctxkeep.sinks.sqlite.native_rank``) into ``_ckrank.so`` beside
it with the machine's C compiler (``$CC``, ``cc`` or ``gcc``).

The library links no SQLite and needs no Python headers (it finds SQLite's functions
through Python's ``_sqlite3`` at run time), so a plain ``cc -shared`` builds it. Without
a compiler, or when it fails, the build goes on without it: the search then ranks with
FTS5's ``bm25()`` (the same results) and nothing is printed at run time. uv rebuilds the
package when this file or the C source changes (``[tool.uv] cache-keys``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = "ctxkeep/sinks/sqlite/_ckrank.c"
LIBRARY = "ctxkeep/sinks/sqlite/_ckrank.so"


def compile_library(root: Path) -> str | None:
    """Build ``LIBRARY`` under ``root``; None when built, else why not (one line)."""
    if sys.platform == "win32":
        return "not built on Windows"
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return "no C compiler"
    out = root / LIBRARY
    tmp = out.with_suffix(".so.tmp")
    cmd = [*cc.split(), "-O2", "-shared", "-fPIC", "-o", str(tmp), str(root / SOURCE), "-lm", "-lpthread"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        return f"{cc} failed: {e}"
    if done.returncode:
        tmp.unlink(missing_ok=True)
        last = (done.stderr or "").strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        return f"{cc} failed: {last[0]}"
    os.replace(tmp, out)
    return None


class CustomBuildHook(BuildHookInterface):
    """Adds the compiled library to the wheel (an editable install finds it in place)."""

    def initialize(self, version: str, build_data: dict) -> None:
        why = compile_library(Path(self.root))
        if why:
            self.app.display_info(f"ctxkeep: ranking library not built ({why}); search uses bm25()")
            return
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        build_data["artifacts"].append(LIBRARY)
