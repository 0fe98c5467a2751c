"""Benchmark (prints figures side by side, not a test): would the vault get smaller if
it stored base64 payloads decoded (issue 27, "images stored decoded")?

For every JSON/JSONL file of the corpus, each opaque value the vault's capture knows
(``sinks.vault.capture._OPAQUE_RX``: a JSON string of ≥ 1,024 base64/base64url
characters: images, Codex's ``encrypted_content``, thinking signatures) is tried as
canonical standard base64, then canonical base64url (decode, encode again, the same
text: only then could a restore give the bytes back identical). Printed: the values
found and canonical per alphabet; zstd-3 of the canonical values as text against
decoded; and zstd-3 of each whole file as it is against the file with its canonical
values as binary (what an object format storing them decoded would compress), summed.

    uv run python tests/bench/bench_vault_b64.py             # the corpus
    uv run python tests/bench/bench_vault_b64.py --root DIR  # another tree
"""

from __future__ import annotations

import argparse
import base64
import binascii
import sys
from pathlib import Path

import zstandard

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
CORPUS_HOME = ROOT.parent / "shared" / "corpus" / "home"


def _canonical(s: bytes) -> tuple[str, bytes] | None:
    """``(alphabet, decoded)`` when ``s`` is canonical base64 of one alphabet, else None."""
    for name, dec, enc in (
        ("std", base64.b64decode, base64.b64encode),
        ("url", base64.urlsafe_b64decode, base64.urlsafe_b64encode),
    ):
        try:
            raw = dec(s + b"=" * (-len(s) % 4)) if name == "url" else base64.b64decode(s, validate=True)
        except (binascii.Error, ValueError):
            continue
        if enc(raw) == s or (name == "url" and enc(raw).rstrip(b"=") == s):
            return name, raw
    return None


def main() -> None:
    from ctxkeep.sinks.vault.capture import _OPAQUE_RX

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=CORPUS_HOME)
    args = ap.parse_args()
    rx = __import__("re").compile(_OPAQUE_RX.pattern.encode())
    z = zstandard.ZstdCompressor(level=3)
    found = 0
    kinds = {"std": 0, "url": 0, "none": 0}
    val_txt = val_txt_z = val_bin_z = 0
    files = file_bytes = file_z = file_dec_z = 0
    for p in sorted(args.root.rglob("*")):
        if not p.is_file() or p.suffix not in (".json", ".jsonl"):
            continue
        data = p.read_bytes()
        files += 1
        file_bytes += len(data)
        file_z += len(z.compress(data))
        parts, last = [], 0
        for m in rx.finditer(data):
            s = m.group(1)
            found += 1
            got = _canonical(s)
            if got is None:
                kinds["none"] += 1
                continue
            kinds[got[0]] += 1
            val_txt += len(s)
            val_txt_z += len(z.compress(s))
            val_bin_z += len(z.compress(got[1]))
            a, b = m.span(1)
            parts += [data[last:a], got[1]]
            last = b
        parts.append(data[last:])
        file_dec_z += len(z.compress(b"".join(parts)))
    print(f"tree: {args.root} ({files} JSON/JSONL files, {file_bytes / 1e6:.2f} MB)")
    print(
        f"opaque values: {found} (canonical std {kinds['std']}, url {kinds['url']}, neither {kinds['none']})"
    )
    if val_txt:
        print(
            f"canonical values: {val_txt / 1e6:.3f} MB; zstd-3 as text {val_txt_z / 1e6:.3f} MB "
            f"({val_txt_z / val_txt:.4f}x) | decoded {val_bin_z / 1e6:.3f} MB ({val_bin_z / val_txt:.4f}x)"
        )
    print(
        f"whole files, zstd-3: as they are {file_z / 1e6:.3f} MB ({file_z / file_bytes:.4f}x of raw) | "
        f"canonical values decoded {file_dec_z / 1e6:.3f} MB ({file_dec_z / file_bytes:.4f}x)"
    )


if __name__ == "__main__":
    main()
