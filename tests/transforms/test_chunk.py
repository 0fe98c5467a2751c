"""Chunking for the FTS index (transforms.chunk): byte cap, exact round trip,
UTF-8 safety, headings and code fences, titles, linear time on huge outputs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxkeep.transforms.chunk import MAX_CHUNK_BYTES, chunk_text, chunk_title, chunks_frame, fence_spans


def _b(s: str) -> int:
    return len(s.encode("utf-8", "surrogatepass"))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(list("ab c\n#`字段😀é") + ["```\n", "# h\n", "\n\n", "word " * 20]), max_size=600
    ).map("".join),
    st.sampled_from([16, 64, 300, 4096]),
)
def test_round_trip_and_cap(text, cap):
    chunks = chunk_text(text, cap)
    assert "".join(chunks) == text
    assert all(0 < _b(c) <= cap for c in chunks)


def test_small_text_is_one_chunk_and_empty_is_none():
    assert chunk_text("hello") == ["hello"]
    assert chunk_text("") == []


def test_never_splits_a_utf8_character():
    text = "東京字段😀" * 2000  # 3- and 4-byte characters, no spaces or lines
    chunks = chunk_text(text)
    assert "".join(chunks) == text
    for c in chunks:
        c.encode("utf-8")  # a split character would be a lone surrogate or fail
        assert _b(c) <= MAX_CHUNK_BYTES


def test_code_fence_that_fits_stays_whole():
    fence = "```python\n" + "".join(f"x{i} = {i}\n\n" for i in range(150)) + "```\n"
    assert _b(fence) < MAX_CHUNK_BYTES
    text = "intro words " * 200 + "\n\n" + fence + "\nafter " * 300
    chunks = chunk_text(text)
    holding = [c for c in chunks if "```python" in c]
    assert len(holding) == 1 and fence in holding[0]


def test_headings_start_chunks():
    sections = [f"# Section {i}\n" + ("body text line\n" * 120) for i in range(6)]
    chunks = chunk_text("".join(sections))
    assert len(chunks) > 1
    assert all(c.startswith("# Section") for c in chunks[1:])
    assert [chunk_title(c, i) for i, c in enumerate(chunks)][:2] == [
        "# Section 0",
        "# Section 2",
    ]  # two sections fit a chunk


def test_fence_spans_unclosed_runs_to_end():
    t = "a\n```\ncode\n```\nb\n~~~\nopen"
    assert fence_spans(t) == [(2, 15), (17, len(t))]


def test_title_first_nonblank_line_and_heading_only_later():
    assert chunk_title("\n\n  first line  \nsecond", 0) == "first line"
    assert chunk_title("plain continuation", 3) == ""
    assert chunk_title("## Later heading\nbody", 2) == "## Later heading"
    assert len(chunk_title("x" * 1000, 0)) == 200


def test_35_mb_output_is_thousands_of_rows_in_one_pass(monkeypatch):
    """Linear time, checked by the work done rather than the clock (the speed is
    tests/bench/bench_chunk.py's): one fence scan for the whole text, one cut search
    per chunk boundary over a window of at most MAX_CHUNK_BYTES characters, and windows
    that overlap by less than a line, so the text is looked at ~once."""
    from ctxkeep.transforms import chunk as chunk_mod

    text = "".join(f"line {i} of a very long tool output\n" for i in range(900_000))  # 35 MB
    fence_scans, windows = [], []
    real_spans, real_cut = chunk_mod.fence_spans, chunk_mod._cut_point

    def spans(t):
        fence_scans.append(len(t))
        return real_spans(t)

    def cut(t, start, limit, sp):
        windows.append(limit - start)
        return real_cut(t, start, limit, sp)

    monkeypatch.setattr(chunk_mod, "fence_spans", spans)
    monkeypatch.setattr(chunk_mod, "_cut_point", cut)
    chunks = chunk_text(text)
    assert len(chunks) == 8551 >= len(text) // MAX_CHUNK_BYTES
    assert max(_b(c) for c in chunks) <= MAX_CHUNK_BYTES
    assert "".join(chunks) == text
    assert fence_scans == [len(text)]
    assert len(windows) == len(chunks) - 1 and max(windows) == MAX_CHUNK_BYTES
    longest_line = max(len(line) for line in text[-100:].splitlines(keepends=True))
    assert len(text) < sum(windows) + len(chunks[-1]) < len(text) + len(chunks) * longest_line


def test_chunks_frame_columns():
    import polars as pl

    df = chunks_frame(
        pl.DataFrame({"content_hash": ["h1", "h2"], "text": ["validateUserInput in 字段", "x" * 5000]})
    )
    assert df.columns == ["content_hash", "seq", "title", "text", "grams"]
    assert df["seq"].to_list() == [0, 0, 1]
    assert df["title"][0] == "validateUserInput in 字段"
    # a chunk with CJK also carries its ASCII words (unicode61 may glue them to CJK)
    assert df["grams"][0] == "字段 段 | validateuserinput in | validate user input |"
