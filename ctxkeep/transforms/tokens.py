"""Token estimates.

The BPE is OpenAI's ``o200k_base`` as GitHub's ``bpe-openai`` Rust crate counts it
(the ``bpe-openai`` package, 0.1.x: ``PyTokenizer.count``, which counts without
building the token list; its rank table is compiled into the extension, so nothing is
read or downloaded). Its counts equal tiktoken's ``o200k_base`` ``encode_ordinary``:
checked text by text on the corpus and on random Unicode while tiktoken was still a
dependency, and pinned by tests/transforms/test_tokens.py since. A lone surrogate
(a JSON ``\ud800`` escape), which the crate cannot take as UTF-8, is counted after
the replacement tiktoken made (``_no_lone_surrogates``), so such texts count as they
always did.

Texts up to ``BPE_FULL_CHARS`` characters (most entries) are encoded whole. Longer
texts (tool outputs, logs, file dumps) are estimated from evenly spaced windows of
``SAMPLE_CHARS`` characters (``SAMPLE_WINDOWS``, plus one per 8 Ki chars, at most 4x
that): tokens per character of the windows x length. Measured on the 376 texts over
4 Ki chars of a 30 MB scaled corpus tree (scale_corpus.py --unique-text): 3.2 %
median error against the full count (7.4 % p90, 1.0 % on the sum) at about a third of
the cost; the heuristic is off by 9 % (median) on the real corpus's long texts. When
the BPE cannot be loaded a CJK-aware heuristic is used: one token per CJK character,
~4 bytes per token for the rest. ``method`` tells which was used: ``o200k_base``,
``o200k_base-sampled`` or ``heuristic``.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.util
import os
import re
import sys
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

BPE_FULL_CHARS = 4 * 1024
SAMPLE_WINDOWS = 4
SAMPLE_CHARS = 512


@lru_cache(maxsize=1)
def _cjk_re() -> re.Pattern:
    """CJK characters (kana, CJK ideographs, Hangul: U+3040 and up), compiled on first
    use: the Unicode ranges take ~6 ms to compile, which every process importing this
    module paid; ``heuristic_tokens`` needs it only for a text holding such a
    character."""
    return re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def heuristic_tokens(text: str) -> int:
    """CJK-aware estimate: CJK characters count one token each, other UTF-8 bytes
    ~4 per token."""
    if not text:
        return 0
    # no character at or above U+3040 (the class's lowest): no CJK, and the pattern's
    # ~6 ms compile is never paid (``max`` of a str runs in C)
    cjk = len(_cjk_re().findall(text)) if max(text) >= "\u3040" else 0
    other = len(text.encode("utf-8", "replace")) - 3 * cjk
    return cjk + max(0, (other + 3) // 4)


def _sampled_tokens(count, text: str) -> int:
    """BPE tokens of ``text`` extrapolated from evenly spaced windows."""
    n = len(text)
    windows = min(SAMPLE_WINDOWS + n // 8192, 4 * SAMPLE_WINDOWS)
    step = (n - SAMPLE_CHARS) // (windows - 1)
    chars = toks = 0
    for k in range(windows):
        w = text[k * step : k * step + SAMPLE_CHARS]
        chars += len(w)
        toks += count(w)
    return round(toks * n / chars) if chars else 0


def estimate_tokens(texts: list[str]) -> tuple[list[int], list[str]]:
    """Token counts for ``texts``.

    Returns ``(counts, methods)`` of the same length: counts in o200k_base tokens
    (estimated for long texts, see the module doc); methods ``"o200k_base"``,
    ``"o200k_base-sampled"`` or ``"heuristic"``. Never raises for any string.
    """
    count = bpe_count()
    if count is None:
        return [heuristic_tokens(t) for t in texts], ["heuristic"] * len(texts)
    counts: list[int] = []
    methods: list[str] = []
    for t in texts:
        if len(t) <= BPE_FULL_CHARS:
            counts.append(count(t))
            methods.append("o200k_base")
        else:
            counts.append(_sampled_tokens(count, t))
            methods.append("o200k_base-sampled")
    return counts, methods


@lru_cache(maxsize=1)
def bpe_count() -> Callable[[str], int] | None:
    """The o200k_base token count of one text (str -> int), bpe-openai's (the module
    doc), built once per process (~0.05-0.08 s of CPU); None when the package is
    missing or cannot build it (``estimate_tokens`` then uses the heuristic). Its
    build's pages stay resident: ``release_counter_pages`` gives them back (the hook
    path, whose RSS has a ceiling)."""
    try:
        count = _bpe_openai_bindings().tokenizer_for_encoding("o200k_base").count
    except Exception:  # missing package, unknown encoding: the heuristic counts
        return None

    def _count(text: str) -> int:
        try:
            return count(text)
        except UnicodeError:  # a lone surrogate
            return count(_no_lone_surrogates(text))

    return _count


def counter_built() -> bool:
    """True once ``bpe_count`` was called in this process (its counter built, or found
    missing): ``release_counter_pages`` then costs no build."""
    return bpe_count.cache_info().currsize > 0


def release_counter_pages() -> int:
    """Build the counter (``bpe_count``) and give back the read-only pages of its
    extension that the build read (``release_clean_pages``): the hook path's peak RSS
    (``service.ingest``, at most ``EARLY_COUNTER_BYTES`` new bytes). Not on every
    ingest: reading ``/proc/self/smaps`` of a process that loaded Polars costs ~7-35 ms
    (CPU, kernel time mostly), which a first ingest of the corpus paid for an RSS no
    ceiling bounds there. Returns the bytes released (0 without the counter)."""
    if bpe_count() is None:
        return 0
    try:
        return release_clean_pages(str(_bindings_path()))
    except ImportError:
        return 0


#: madvise(2)'s MADV_DONTNEED (Linux, <sys/mman.h>)
_MADV_DONTNEED = 4
_MAPPING = re.compile(r"(?m)^(?=[0-9a-f]+-[0-9a-f]+ )")
_FIELD = re.compile(r"(?m)^(\w+):\s+(\d+) kB")


def release_clean_pages(path: str) -> int:
    """Drop from this process's RSS the pages of ``path``'s read-only mappings that
    were only read (Linux; elsewhere nothing): bpe-openai builds its o200k counter from
    data in its extension's read-only segment, ~33 MB of pages that stay resident
    after the build though the counter never reads them again. ``madvise(MADV_DONTNEED)``
    on a private file mapping none of whose pages was written gives them back; a later
    read faults the same bytes back in from the file. A mapping with a written page
    (the RELRO segment: relocated, then made read-only) is left alone: dropping it would
    undo the relocations. Returns the bytes released (0 on any error).

    Why it is kept (issue 22, "a latency budget instead of tricks"): the hook path's
    ceiling, ``ingest --path FILE`` of 10 new lines ≤ 150 MB peak RSS, is met only with
    it (docs/design.md, "Latency budget", with the figures)."""
    if sys.platform != "linux":
        return 0
    try:
        with open("/proc/self/smaps") as f:
            smaps = f.read()
        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    except (OSError, AttributeError):
        return 0
    released, path = 0, os.path.realpath(path)  # the kernel lists resolved paths
    for block in _MAPPING.split(smaps):
        head = block.split("\n", 1)[0].split()
        if len(head) < 6 or head[1] != "r--p" or " ".join(head[5:]) != path:
            continue
        kb = dict(_FIELD.findall(block))
        if any(int(kb.get(k, "1")) for k in ("Private_Dirty", "Shared_Dirty", "Anonymous")):
            continue  # a written page: not the file's bytes any more
        start, end = (int(x, 16) for x in head[0].split("-"))
        if libc.madvise(start, end - start, _MADV_DONTNEED) == 0:
            released += end - start
    return released


def _no_lone_surrogates(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD and each surrogate pair
    joined: what tiktoken's ``encode_ordinary`` encodes for such a text (tiktoken
    0.9-0.12 ``core.py``: ``text.encode("utf-16", "surrogatepass").decode("utf-16",
    "replace")``)."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _bpe_openai_bindings():
    """bpe-openai's Rust extension module (``bpe_openai._bindings``), loaded without the
    package's ``__init__``: that imports ``bpe_openai.compat``, whose model registry
    decodes the rank tables of every encoding in Python at import (gunzip + base64:
    0.78 s of ``-X importtime`` on this machine kind, 2026-12-04, under load), which the
    Rust crate holds already. Raises ImportError when the package is missing."""
    path = _bindings_path()
    loader = importlib.machinery.ExtensionFileLoader("bpe_openai._bindings", str(path))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


def _bindings_path() -> Path:
    """The file of bpe-openai's Rust extension (``bpe_openai/_bindings*.so``); raises
    ImportError when the package or the file is missing."""
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("bpe_openai")
    folder = Path(next(iter(spec.submodule_search_locations)))
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = folder / f"_bindings{suffix}"
        if path.is_file():
            return path
    raise ImportError(f"bpe_openai._bindings in {folder}")
