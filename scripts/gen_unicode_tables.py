"""Generate core/tokenizers/unicode_tables.cpp: the Unicode data the BERT WordPiece tokenizer needs.

How to run (from anywhere; needs the reference venv, which has the HF `tokenizers` package):
  ~/.cache/cutenative/venv-ref/bin/python scripts/gen_unicode_tables.py
It rewrites core/tokenizers/unicode_tables.cpp (committed; do not edit it by hand) and prints a report of where
Python's unicodedata disagrees with the reference.

Which Unicode data, and why
---------------------------
The tokenizer we must match exactly is the Rust one in HF `tokenizers` (sentence-transformers loads the fast
tokenizer, built from tokenizer.json: BertNormalizer + BertPreTokenizer + WordPiece). That Rust code does not use one
Unicode version: `char::to_lowercase` / `char::is_whitespace` come from the Rust standard library the wheel was built
with (a recent Unicode, 16 or later: e.g. U+1C89 lowercases to U+1C8A, which Unicode 14 does not know), while the
control / punctuation / nonspacing-mark classes come from the `unicode_categories` crate and NFD from
`unicode-normalization-alignments`, both carrying much older data (e.g. U+0890, a format character since Unicode 14,
is not a control character there, so clean_text keeps it). Python's `unicodedata` (14.0.0 for Python 3.11) matches
neither exactly.

So the tables are not derived from unicodedata at all: this script *probes the installed `tokenizers` library one
code point at a time*, through the very normalizer / pre-tokenizer objects the reference pipeline uses, and records
what it does:
  clean_text        BertNormalizer(clean_text only) on each char: '' -> DROP, ' ' -> CLEAN_WS
  CJK               BertNormalizer(handle_chinese_chars only): ' c ' -> CJK
  NFD               normalizers.NFD() on each char (full canonical decomposition; Hangul checked to be the
                    algorithmic one, which the C++ computes instead of storing)
  nonspacing marks  BertNormalizer(strip_accents only) on each char without a decomposition: '' -> MN
  combining class   needed for canonical reordering inside NFD: probed by whether NFD swaps the char with
                    marks of known class (the values themselves are stable across Unicode versions)
  lowercase         BertNormalizer(lowercase only) on each char (Rust char::to_lowercase, 1 -> up to 3 chars)
  whitespace/punct  BertPreTokenizer on "a" + c + "a": split and dropped -> PT_WS, isolated -> PUNCT
Every code point U+0000..U+10FFFF except the surrogates is probed, so the tables reproduce the reference exactly
for single characters; tests/tokenizers/test_wordpiece.cpp checks whole strings against sentence-transformers.
Python's unicodedata is used only to pick representative marks for the combining-class probes and for the report.
Re-run this script when the reference `tokenizers` version changes.

Layout of the generated tables (declared in core/tokenizers/unicode_tables.h)
  kFlagStarts/kFlags   range starts + flag bits; a code point's flags are those of the last start <= it
  kDecomp/kDecompPool  full canonical decomposition of each decomposable char (Hangul syllables excluded),
                       *reduced* to what accent stripping needs (below)
  kCccRanges           ranges [lo, hi] of one nonzero canonical combining class, for the chars that survive
                       accent stripping only (nonzero class and not a nonspacing mark: ~25 chars)
  kLower               ranges [lo, hi], stride 1 or 2, delta: cp -> cp + delta for (cp - lo) % stride == 0
  kLowerMulti          chars whose lowercase is more than one char (U+0130 -> "i\u0307")

Why the reduced decomposition is exact. strip_accents is "NFD the whole string, then drop every nonspacing mark
(Mn)". NFD = full decomposition of each char, then canonical ordering: a stable sort by combining class (ccc) inside
each maximal run of nonzero-ccc chars. A mark that has a nonzero ccc and is Mn is inside a run (it never bounds one)
and is dropped afterwards, so dropping it *before* the sort leaves the survivors in the same order (filtering commutes
with a stable sort and does not merge or split runs). Mn chars with ccc 0 do bound runs, so they are kept in the
decompositions and dropped only after the sort. The C++ therefore: decomposes with the reduced table, drops
(MN and CCC) chars at once, sorts the remaining nonzero-ccc runs, then drops the remaining MN chars.

What the report said for tokenizers 0.23.3 against Python 3.11's unicodedata 14.0.0 (a table built from unicodedata,
as transformers' slow BasicTokenizer would use it, would be wrong on):
  clean_text drop   137481 code points: the reference also drops private use (Co), and does not drop format chars
                    newer than its tables (U+0890, U+0891, U+08E2)
  whitespace        U+2028, U+2029 (Rust White_Space; Python's slow tokenizer only takes Zs)
  punctuation       106 code points newer than the reference's category tables (U+061D, U+2E43.., U+2E4E..)
  nonspacing marks  385 newer marks the reference keeps (U+0898.., U+1DFA, ...)
  combining class   98 code points (marks the reference's NFD does not know: class 0 there)
  lowercase         55 code points the newer Rust std lowercases (U+1C89, U+A7CB, U+10D50.., ...)
  NFD               U+11938 (decomposes since Unicode 13; not in the reference's NFD)
"""

from __future__ import annotations

import os
import sys
import unicodedata

import tokenizers
from tokenizers import normalizers, pre_tokenizers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "core", "tokenizers", "unicode_tables.cpp")

# Flag bits; keep in sync with core/tokenizers/unicode_tables.h.
DROP = 1 << 0      # removed by clean_text (NUL, U+FFFD, "other" categories except \t \n \r)
CLEAN_WS = 1 << 1  # turned into ' ' by clean_text
PT_WS = 1 << 2     # whitespace for the pre-tokenizer (split and dropped)
PUNCT = 1 << 3     # punctuation for the pre-tokenizer (isolated)
CJK = 1 << 4       # surrounded by spaces by handle_chinese_chars
MN = 1 << 5        # nonspacing mark: dropped by strip_accents (after NFD)
CCC = 1 << 6       # nonzero canonical combining class

MAX_CP = 0x10FFFF
HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3


def code_points():
    for cp in range(MAX_CP + 1):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        yield cp


def bert(clean=False, cjk=False, strip=False, lower=False):
    return normalizers.BertNormalizer(clean_text=clean, handle_chinese_chars=cjk, strip_accents=strip, lowercase=lower)


def hangul_nfd(cp: int) -> list[int]:
    s = cp - HANGUL_FIRST
    l, v, t = 0x1100 + s // 588, 0x1161 + (s % 588) // 28, 0x11A7 + s % 28
    return [l, v] if t == 0x11A7 else [l, v, t]


def probe():
    clean, cjk, strip, lower = bert(clean=True), bert(cjk=True), bert(strip=True), bert(lower=True)
    nfd = normalizers.NFD()
    pt = pre_tokenizers.BertPreTokenizer()

    flags: dict[int, int] = {}
    decomp: dict[int, list[int]] = {}
    lowers: dict[int, list[int]] = {}
    for cp in code_points():
        c = chr(cp)
        f = 0
        r = clean.normalize_str(c)
        if r == "":
            f |= DROP
        elif r == " ":
            f |= CLEAN_WS
        else:
            assert r == c, hex(cp)
        r = cjk.normalize_str(c)
        if r == " " + c + " ":
            f |= CJK
        else:
            assert r == c, hex(cp)
        d = nfd.normalize_str(c)
        if d != c:
            decomp[cp] = [ord(x) for x in d]
        else:
            r = strip.normalize_str(c)
            if r == "":
                f |= MN
            else:
                assert r == c, hex(cp)
        r = lower.normalize_str(c)
        if r != c:
            lowers[cp] = [ord(x) for x in r]
        parts = [p for p, _ in pt.pre_tokenize_str("a" + c + "a")]
        if parts == ["a", "a"]:
            f |= PT_WS
        elif parts == ["a", c, "a"]:
            f |= PUNCT
        else:
            assert parts == ["a" + c + "a"], (hex(cp), parts)
        flags[cp] = f
    return flags, decomp, lowers


def probe_ccc(decomp: dict[int, list[int]]) -> dict[int, int]:
    """Canonical combining class of every char without a decomposition, as the reference's NFD applies it."""
    nfd = normalizers.NFD()

    def swaps(a: str, b: str) -> bool:  # NFD reorders the pair <=> ccc(a) > ccc(b) > 0
        return a != b and nfd.normalize_str(a + b) == b + a

    low, high = "\u0334", "\u0301"  # classes 1 and 230, in Unicode since 1.1
    # One representative per class value: the first char of that class (per Python) that the reference's NFD
    # also treats as a mark of about that class (a newer char it does not know would have class 0 there).
    reps: dict[int, str] = {}
    for cp in code_points():
        c = chr(cp)
        v = unicodedata.combining(c)
        if not v or v in reps or cp in decomp:
            continue
        if (v == 1 or swaps(c, low)) and (v >= 230 or swaps(high, c)) and (v <= 230 or swaps(c, high)):
            reps[v] = c
    values = sorted(reps)
    assert values[0] == 1 and 230 in values
    ccc: dict[int, int] = {}
    for cp in code_points():
        if cp in decomp:
            continue
        c = chr(cp)
        if swaps(c, reps[1]):  # class > 1: above the largest class it sorts after, at most the next one
            below = [v for v in values if swaps(c, reps[v])]
            nxt = [v for v in values if v > max(below)]
            assert nxt, hex(cp)
            # Class values in use are all old; Python (a newer Unicode than the reference's NFD) agrees or does
            # not know the char.
            py = unicodedata.combining(c)
            assert py == 0 or py == nxt[0], (hex(cp), py, nxt[0])
            ccc[cp] = nxt[0]
        elif swaps(reps[230], c):
            ccc[cp] = 1
    for v, c in reps.items():
        assert ccc.get(ord(c)) == v, (hex(ord(c)), v)
    return ccc


def starts_table(flags: dict[int, int]):
    out = []
    prev = None
    for cp in range(MAX_CP + 1):
        f = flags.get(cp, 0)
        if 0xD800 <= cp <= 0xDFFF:  # never decoded; reuse the neighbour's flags so ranges merge
            f = prev
        if f != prev:
            out.append((cp, f))
            prev = f
    return out


def ranges_of(values: dict[int, int]):
    out = []
    for cp in sorted(values):
        v = values[cp]
        if out and out[-1][1] == cp - 1 and out[-1][2] == v:
            out[-1][1] = cp
        else:
            out.append([cp, cp, v])
    return out


def lower_ranges(single: dict[int, int]):
    """Greedy: runs of equal delta with stride 1, or stride 2 (alternating upper/lower blocks)."""
    cps = sorted(single)
    out = []
    i = 0
    while i < len(cps):
        lo = cps[i]
        delta = single[lo] - lo
        best = (lo, 1, 1)  # hi, stride, count
        for stride in (1, 2):
            hi, n = lo, 1
            # Intervals stay disjoint: with stride 2 the skipped code point must have no mapping.
            while (hi + stride in single and single[hi + stride] - (hi + stride) == delta
                   and (stride == 1 or hi + 1 not in single)):
                hi += stride
                n += 1
            if n > best[2]:
                best = (hi, stride, n)
        hi, stride, n = best
        out.append((lo, hi, stride, delta))
        while i < len(cps) and cps[i] <= hi:
            i += 1
    for a, b in zip(out, out[1:]):
        assert a[1] < b[0]
    return out


def check_lower(ranges, single):
    got: dict[int, int] = {}
    for lo, hi, stride, delta in ranges:
        for cp in range(lo, hi + 1, stride):
            assert cp not in got, hex(cp)
            got[cp] = cp + delta
    assert got == single


def python_report(flags, decomp, lowers, ccc):
    """What a table built from Python's unicodedata would get wrong (printed only)."""
    diffs: dict[str, list[int]] = {}

    def add(kind, cp):
        diffs.setdefault(kind, []).append(cp)

    for cp in code_points():
        c = chr(cp)
        cat = unicodedata.category(c)
        f = flags[cp]
        py_drop = cp in (0, 0xFFFD) or (c not in "\t\n\r" and cat in ("Cc", "Cf"))
        py_ws = c in " \t\n\r" or cat == "Zs"
        py_punct = (33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126) or cat.startswith("P")
        if py_drop != bool(f & DROP):
            add("clean_text drop (Python slow: Cc/Cf)", cp)
        if not py_drop and py_ws != bool(f & CLEAN_WS):
            add("clean_text whitespace (Python slow: Zs)", cp)
        if py_punct != bool(f & PUNCT):
            add("punctuation", cp)
        d = unicodedata.normalize("NFD", c)
        if [ord(x) for x in d] != decomp.get(cp, [cp]):
            add("NFD", cp)
        if cp not in decomp and (cat == "Mn") != bool(f & MN):
            add("nonspacing mark", cp)
        if cp not in decomp and unicodedata.combining(c) != ccc.get(cp, 0):
            add("combining class", cp)
        low = c.lower()
        if [ord(x) for x in low] != lowers.get(cp, [cp]):
            add("lowercase", cp)
    return diffs


def fmt_rows(items, per_line, width=118):
    """Items joined by spaces, at most per_line a line and lines no wider than width."""
    lines, cur = [], []
    for it in items:
        if cur and (len(cur) == per_line or 4 + len(" ".join(cur + [it])) > width):
            lines.append("    " + " ".join(cur))
            cur = []
        cur.append(it)
    if cur:
        lines.append("    " + " ".join(cur))
    return "\n".join(lines)


def main():
    flags, decomp, lowers = probe()
    ccc = probe_ccc(decomp)
    for cp, v in ccc.items():
        flags[cp] |= CCC

    # CJK must be exactly BERT's ranges (the C++ uses the flag; this guards the probe).
    cjk_ranges = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
                  (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]
    for cp in code_points():
        assert bool(flags[cp] & CJK) == any(lo <= cp <= hi for lo, hi in cjk_ranges), hex(cp)
    # Hangul syllables: algorithmic decomposition in the C++.
    for cp in range(HANGUL_FIRST, HANGUL_LAST + 1):
        assert decomp.pop(cp) == hangul_nfd(cp), hex(cp)
    # Decompositions are fully decomposed: no part decomposes further.
    for cp, d in decomp.items():
        assert all(x not in decomp for x in d) and len(d) <= 4, hex(cp)
    for cp, d in lowers.items():
        assert len(d) <= 3, hex(cp)
    # ASCII sanity for the C++ fast path: A-Z lowercase by +32, nothing else in ASCII changes.
    for cp in range(128):
        assert lowers.get(cp) == ([cp + 32] if 65 <= cp <= 90 else None), cp
        assert cp not in decomp and not flags[cp] & (MN | CCC | CJK)

    single = {cp: d[0] for cp, d in lowers.items() if len(d) == 1}
    multi = {cp: d for cp, d in lowers.items() if len(d) > 1}
    lr = lower_ranges(single)
    check_lower(lr, single)
    starts = starts_table(flags)

    full_decomp = dict(decomp)
    # Reduced decompositions and the survivors' combining classes (see the docstring).
    decomp = {cp: [x for x in d if not (flags[x] & MN and flags[x] & CCC)] for cp, d in decomp.items()}
    ccc_kept = {cp: v for cp, v in ccc.items() if not flags[cp] & MN}
    pool: list[int] = []
    dentries = []
    for cp in sorted(decomp):
        d = decomp[cp]
        dentries.append((cp, len(pool), len(d)))
        pool.extend(d)
    assert len(pool) < 65536
    ccc_ranges = ranges_of(ccc_kept)

    hdr = (
        "// Generated by scripts/gen_unicode_tables.py -- do not edit by hand; re-run the script instead.\n"
        f"// Probed from HF tokenizers {tokenizers.__version__} (the reference the tokenizer must match), with\n"
        f"// Python {sys.version.split()[0]} (unicodedata {unicodedata.unidata_version}) used only to choose probe "
        "marks.\n"
        "// The script's docstring explains the sources and the layout.\n"
    )
    body = [hdr, '#include "core/tokenizers/unicode_tables.h"\n', "namespace cn::text::unicode {\n"]
    body.append(f"// {len(starts)} ranges: first code point, flags.\n")
    body.append(f"const uint32_t kFlagStarts[{len(starts)}] = {{\n")
    body.append(fmt_rows([f"0x{cp:X}," for cp, _ in starts], 12) + "\n};\n")
    body.append(f"const uint8_t kFlags[{len(starts)}] = {{\n")
    body.append(fmt_rows([f"{f}," for _, f in starts], 24) + "\n};\n")
    body.append(f"const size_t kFlagCount = {len(starts)};\n\n")
    body.append(f"// {len(dentries)} canonical decompositions (full, then reduced: nonspacing marks of nonzero "
                f"class removed), {len(pool)} pool entries.\n")
    body.append(f"const Decomposition kDecomp[{len(dentries)}] = {{\n")
    body.append(fmt_rows([f"{{0x{cp:X},{off},{n}}}," for cp, off, n in dentries], 9) + "\n};\n")
    body.append(f"const size_t kDecompCount = {len(dentries)};\n")
    body.append(f"const uint32_t kDecompPool[{len(pool)}] = {{\n")
    body.append(fmt_rows([f"0x{x:X}," for x in pool], 16) + "\n};\n\n")
    body.append(f"// {len(ccc_ranges)} ranges of nonzero canonical combining class (chars that are not Mn).\n")
    body.append(f"const CccRange kCccRanges[{len(ccc_ranges)}] = {{\n")
    body.append(fmt_rows([f"{{0x{lo:X},0x{hi:X},{v}}}," for lo, hi, v in ccc_ranges], 4) + "\n};\n")
    body.append(f"const size_t kCccCount = {len(ccc_ranges)};\n\n")
    body.append(f"// {len(lr)} lowercase ranges ({len(single)} chars).\n")
    body.append(f"const LowerRange kLower[{len(lr)}] = {{\n")
    body.append(fmt_rows([f"{{0x{lo:X},0x{hi:X},{s},{d}}}," for lo, hi, s, d in lr], 5) + "\n};\n")
    body.append(f"const size_t kLowerCount = {len(lr)};\n")
    body.append(f"const LowerMulti kLowerMulti[{len(multi)}] = {{\n")
    body.append(fmt_rows(["{0x%X,%d,{%s}}," % (cp, len(d), ",".join(f"0x{x:X}" for x in d + [0] * (3 - len(d))))
                          for cp, d in sorted(multi.items())], 4) + "\n};\n")
    body.append(f"const size_t kLowerMultiCount = {len(multi)};\n\n")
    body.append("}  // namespace cn::text::unicode\n")
    text = "".join(body)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)

    print(f"wrote {OUT}: {len(text)} bytes; {len(starts)} flag ranges, {len(dentries)} decompositions, "
          f"{len(ccc_ranges)} ccc ranges, {len(lr)} lowercase ranges, {len(multi)} multi-char lowercases")
    print(f"tokenizers {tokenizers.__version__}; Python {sys.version.split()[0]}, unicodedata "
          f"{unicodedata.unidata_version}")
    print("Where a table built from Python's unicodedata would differ from the reference:")
    with_hangul = full_decomp | {cp: hangul_nfd(cp) for cp in range(HANGUL_FIRST, HANGUL_LAST + 1)}
    for kind, cps in python_report(flags, with_hangul, lowers, ccc).items():
        ex = " ".join(f"U+{cp:04X}" for cp in cps[:12])
        print(f"  {kind}: {len(cps)} code points, e.g. {ex}")


if __name__ == "__main__":
    main()
