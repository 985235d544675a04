"""Generate core/tokenizers/bpe_unicode_tables.cpp and bpe_decomp_tables.cpp: the Unicode data the Qwen2 byte-level
BPE tokenizer needs.

How to run (from anywhere; needs the reference venv, which has the HF `tokenizers` package, and the pinned
clang-format that scripts/setup.sh installs into $CN_VENV):
  ~/.cache/cutenative/venv-ref/bin/python scripts/gen_bpe_unicode_tables.py
It rewrites core/tokenizers/bpe_unicode_tables.cpp and bpe_decomp_tables.cpp (committed; do not edit them by hand),
after checking a Python model of the C++ algorithms (core/tokenizers/bpe_unicode.cpp) against the reference on every
code point (NFC) and on 300,000 + 400,000 random strings (NFC, the pre-tokenizer split), and prints where Python's
unicodedata disagrees with the reference.

What the tokenizer needs, and where the reference gets it
---------------------------------------------------------
Qwen2/Qwen3's tokenizer.json runs, in HF `tokenizers` (Rust): normalizer NFC, then the pre-tokenizer
Split(Regex(...), Isolated) + ByteLevel, then BPE. Two Unicode sources are involved, neither of them Python's:
  NFC    the `unicode-normalization-alignments` crate: old data (e.g. U+11938 has no decomposition there; 98 marks
         newer than its tables have combining class 0 there), so the decompositions, the combining classes and
         the compositions are probed from `normalizers.NFD()` / `normalizers.NFC()`, char by char.
  regex  the Split pattern is compiled by Oniguruma (the `onig` crate, tokenizers' default regex engine), whose
         Unicode data is newer than Python 3.11's (\p{L} knows U+1C89, U+A7CB, U+105C0.., \p{N} U+10D40.., ...).
         \p{L}, \p{N} and \s are probed with `pre_tokenizers.Split(Regex(...), "removed")` on every char: \s is
         Oniguruma's Unicode White_Space (25 chars: \t \n \v \f \r, space, U+0085, U+00A0, U+1680,
         U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000), not Python's str.isspace (which adds
         U+001C..U+001F). No char is in two of the classes (checked).
  (?i:'s|'t|'re|'ve|'m|'ll|'d)  Oniguruma's Unicode case folding: probed by running the group on "'" + c (+ a second
         letter) for every c: apart from ASCII upper/lower case only U+017F (LATIN SMALL LETTER LONG S, folds to
         's') matches; no char matches through a multi-char fold.

Layout of the generated tables (declared in core/tokenizers/bpe_unicode.h)
  kCategoryRanges      range start << 8 | a byte per range: the regex class (kOther, kLetter, kNumber,
                       kSpace) in the low bits, kNfcCheck when the char may change under NFC (it decomposes, has
                       a nonzero combining class, or is the second char of a composition; Hangul syllables are
                       not flagged: they recompose to themselves unless a flagged jamo follows): a text without
                       such chars is already NFC. A code point's byte is that of the last start <= it.
  kNfcDecomp/kNfcDecompPool  in bpe_decomp_tables.cpp (the 800-line limit): full canonical decomposition of each
                       decomposable char except Hangul syllables (algorithmic in the C++; checked here), as the
                       reference's NFD gives it
  kNfcCcc              ranges [lo, hi] of one nonzero canonical combining class (chars without a decomposition)
  kNfcCompose          (first, second) -> composite, sorted by (first, second): every primary composite that
                       the reference's NFC recomposes (Hangul excluded: algorithmic)
  kFoldExtra           non-ASCII chars that the case-insensitive contraction group matches, with the ASCII letter
                       they fold to
Re-run this script when the reference `tokenizers` version changes.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import unicodedata

import tokenizers
from tokenizers import Regex, normalizers, pre_tokenizers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_unicode_tables as bert_tables  # noqa: E402  (probe_ccc: combining classes as the reference's NFD sees them)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "core", "tokenizers", "bpe_unicode_tables.cpp")
OUT_DECOMP = os.path.join(ROOT, "core", "tokenizers", "bpe_decomp_tables.cpp")
PATTERN = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"

# Keep in sync with core/tokenizers/bpe_unicode.h.
OTHER, LETTER, NUMBER, SPACE = 0, 1, 2, 3
NFC_CHECK = 1 << 2

MAX_CP = 0x10FFFF
S_BASE, L_BASE, V_BASE, T_BASE = 0xAC00, 0x1100, 0x1161, 0x11A7
L_COUNT, V_COUNT, T_COUNT = 19, 21, 28
S_COUNT = L_COUNT * V_COUNT * T_COUNT


def code_points():
    for cp in range(MAX_CP + 1):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        yield cp


# ---- probes ----------------------------------------------------------------------------------------------------

def probe_classes() -> dict[int, int]:
    probes = [(LETTER, r"\p{L}"), (NUMBER, r"\p{N}"), (SPACE, r"\s")]
    splits = [(k, pre_tokenizers.Split(Regex(p), "removed")) for k, p in probes]
    cls = {}
    for cp in code_points():
        c = chr(cp)
        hits = [k for k, s in splits if not s.pre_tokenize_str(c)]
        assert len(hits) <= 1, (hex(cp), hits)
        cls[cp] = hits[0] if hits else OTHER
    return cls


def probe_folds() -> dict[int, str]:
    """Chars the contraction group matches case-insensitively, mapped to the ASCII letter they stand for."""
    alts = ["s", "t", "re", "ve", "m", "ll", "d"]
    groups = {a: pre_tokenizers.Split(Regex("(?i:'" + a + ")"), "removed") for a in alts}

    def full(a: str, t: str) -> bool:
        return not groups[a].pre_tokenize_str(t)

    folds: dict[int, str] = {}
    for cp in code_points():
        c = chr(cp)
        got = set()
        for a in alts:
            if len(a) == 1:
                if full(a, "'" + c):
                    got.add(a)
            else:
                assert not full(a, "'" + c), hex(cp)  # no multi-char fold stands for a whole contraction
                if full(a, "'" + c + a[1]):
                    got.add(a[0])
                if full(a, "'" + a[0] + c):
                    got.add(a[1])
        if got:
            assert len(got) == 1, (hex(cp), got)
            folds[cp] = got.pop()
    expected = {ord(x): x for x in "stremvld"} | {ord(x.upper()): x for x in "stremvld"} | {0x17F: "s"}
    assert folds == expected, sorted((hex(k), v) for k, v in folds.items() if expected.get(k) != v)
    return {cp: x for cp, x in folds.items() if cp >= 0x80}


def hangul_decompose(cp: int) -> list[int]:
    s = cp - S_BASE
    out = [L_BASE + s // (V_COUNT * T_COUNT), V_BASE + (s % (V_COUNT * T_COUNT)) // T_COUNT]
    if s % T_COUNT:
        out.append(T_BASE + s % T_COUNT)
    return out


def probe_nfc():
    nfd, nfc = normalizers.NFD(), normalizers.NFC()
    decomp: dict[int, list[int]] = {}
    recomposed: set[int] = set()  # decomposable chars that NFC leaves as they are: primary composites
    for cp in code_points():
        c = chr(cp)
        d = nfd.normalize_str(c)
        if d != c:
            decomp[cp] = [ord(x) for x in d]
            if nfc.normalize_str(c) == c:
                recomposed.add(cp)
        else:
            assert nfc.normalize_str(c) == c, hex(cp)
    ccc = bert_tables.probe_ccc(decomp)
    # Hangul: algorithmic in the C++.
    for cp in range(S_BASE, S_BASE + S_COUNT):
        assert decomp.pop(cp) == hangul_decompose(cp), hex(cp)
        recomposed.discard(cp)
    for cp, d in decomp.items():
        assert all(x not in decomp for x in d) and 1 <= len(d) <= 4, hex(cp)
        assert all(not (S_BASE <= x < S_BASE + S_COUNT) for x in d), hex(cp)
    # Composition pairs: each primary composite's canonical mapping as Python states it, confirmed by the reference
    # recomposing it (the reference's data is older than Python's, never newer: asserted).
    compose: dict[tuple[int, int], int] = {}
    for cp in sorted(recomposed):
        m = unicodedata.decomposition(chr(cp)).split()
        assert len(m) == 2 and not m[0].startswith("<"), (hex(cp), m)
        a, b = int(m[0], 16), int(m[1], 16)
        assert nfc.normalize_str(chr(a) + chr(b)) == chr(cp), hex(cp)
        assert (a, b) not in compose
        compose[(a, b)] = cp
    return decomp, ccc, compose


# ---- a Python model of the C++ (core/tokenizers/bpe_unicode.cpp), checked against the reference ----------------

class Model:
    def __init__(self, cls, folds, decomp, ccc, compose):
        self.cls, self.folds, self.decomp, self.ccc, self.compose = cls, folds, decomp, ccc, compose
        seconds = {b for _, b in compose} | set(range(V_BASE, V_BASE + V_COUNT)) | set(range(T_BASE + 1, T_BASE + T_COUNT))
        self.check = {cp for cp in code_points() if cp in decomp or ccc.get(cp, 0) or cp in seconds}

    def decompose(self, cp):
        if S_BASE <= cp < S_BASE + S_COUNT:
            return hangul_decompose(cp)
        return self.decomp.get(cp, [cp])

    def compose_pair(self, a, b):
        if L_BASE <= a < L_BASE + L_COUNT and V_BASE <= b < V_BASE + V_COUNT:
            return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT
        if S_BASE <= a < S_BASE + S_COUNT and (a - S_BASE) % T_COUNT == 0 and T_BASE < b < T_BASE + T_COUNT:
            return a + (b - T_BASE)
        return self.compose.get((a, b))

    def nfc(self, s: str) -> str:
        if not any(ord(c) in self.check for c in s):  # the quick check: nothing that can change
            return s
        d = [x for c in s for x in self.decompose(ord(c))]
        i = 0
        while i < len(d):  # canonical ordering: stable sort of each run of nonzero classes
            if self.ccc.get(d[i], 0):
                j = i
                while j < len(d) and self.ccc.get(d[j], 0):
                    j += 1
                d[i:j] = sorted(d[i:j], key=lambda x: self.ccc[x])
                i = j
            else:
                i += 1
        out: list[int] = []
        starter, last = None, None  # last: class of the last char kept since the starter (None: adjacent)
        for x in d:
            k = self.ccc.get(x, 0)
            if starter is not None and (last is None or last < k):
                c = self.compose_pair(out[starter], x)
                if c is not None:
                    out[starter] = c
                    continue
            if k == 0:
                starter, last = len(out), None
            else:
                last = k
            out.append(x)
        return "".join(map(chr, out))

    def fold(self, c: str) -> str:
        return c.lower() if c < "\x80" else self.folds.get(ord(c), "")

    def split(self, s: str) -> list[str]:
        cls = [self.cls[ord(c)] for c in s]
        n, out, i = len(s), [], 0
        while i < n:
            j = self.match(s, cls, i)
            assert j > i
            out.append(s[i:j])
            i = j
        return out

    def match(self, s, cls, i):
        n, c = len(s), s[i]
        if c == "'" and i + 1 < n:  # (?i:'s|'t|'re|'ve|'m|'ll|'d)
            a = self.fold(s[i + 1])
            if a and a in "stmd":
                return i + 2
            if i + 2 < n and (a, self.fold(s[i + 2])) in (("r", "e"), ("v", "e"), ("l", "l")):
                return i + 3
        start = -1  # [^\r\n\p{L}\p{N}]?\p{L}+
        if cls[i] == LETTER:
            start = i
        elif c not in "\r\n" and cls[i] != NUMBER and i + 1 < n and cls[i + 1] == LETTER:
            start = i + 1
        if start >= 0:
            j = start
            while j < n and cls[j] == LETTER:
                j += 1
            return j
        if cls[i] == NUMBER:  # \p{N}
            return i + 1
        start = i if cls[i] == OTHER else i + 1 if c == " " and i + 1 < n and cls[i + 1] == OTHER else -1
        if start >= 0:  # ` ?[^\s\p{L}\p{N}]+[\r\n]*`
            j = start
            while j < n and cls[j] == OTHER:
                j += 1
            while j < n and s[j] in "\r\n":
                j += 1
            return j
        assert cls[i] == SPACE
        e = i
        while e < n and cls[e] == SPACE:
            e += 1
        nl = max((k for k in range(i, e) if s[k] in "\r\n"), default=-1)
        if nl >= 0:  # \s*[\r\n]+ : backtracks to the last line break of the run
            return nl + 1
        if e == n or e - i == 1:  # \s+(?!\S) to the end of the text, or \s+ for a single space before \S
            return e
        return e - 1  # \s+(?!\S): all but the last, which goes with what follows


def check_model(m: Model):
    nfc = normalizers.NFC()
    split = pre_tokenizers.Split(Regex(PATTERN), "isolated")
    for cp in code_points():
        c = chr(cp)
        assert m.nfc(c) == nfc.normalize_str(c), hex(cp)
    rng = random.Random(20240611)
    decomposable = sorted(m.decomp) + [S_BASE, S_BASE + 1, S_BASE + 27, 0xD7A3]
    marks = sorted(m.ccc)
    parts = sorted({x for d in m.decomp.values() for x in d} | {a for a, _ in m.compose} | {b for _, b in m.compose})
    jamo = list(range(L_BASE, L_BASE + L_COUNT)) + list(range(V_BASE, V_BASE + V_COUNT)) + list(range(T_BASE, T_BASE + T_COUNT))
    pools = [decomposable, marks, parts, jamo, [ord(x) for x in "aeiouAEIOU "]]
    for _ in range(300000):
        s = "".join(chr(rng.choice(rng.choice(pools))) for _ in range(rng.randint(1, 8)))
        assert m.nfc(s) == nfc.normalize_str(s), [hex(ord(x)) for x in s]
    by_class = {k: [cp for cp, v in m.cls.items() if v == k] for k in (OTHER, LETTER, NUMBER, SPACE)}
    special = list("'sStTrReEvVmMlLdD\u017f \t\r\n\u00a0\u3000!.,-_\x00\x0b") + ["\u0301", "\u2028", "1", "x"]
    for _ in range(400000):
        s = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            if r < 0.6:
                s.append(rng.choice(special))
            else:
                s.append(chr(rng.choice(by_class[rng.choice((OTHER, LETTER, NUMBER, SPACE))])))
        s = "".join(s)
        want = [p for p, _ in split.pre_tokenize_str(s)]
        assert m.split(s) == want, (s, m.split(s), want)


# ---- output ---------------------------------------------------------------------------------------------------

def starts_table(values: dict[int, int]):
    out, prev = [], None
    for cp in range(MAX_CP + 1):
        v = values.get(cp, prev if 0xD800 <= cp <= 0xDFFF else 0)  # surrogates never occur: merge with neighbours
        if v != prev:
            out.append((cp, v))
            prev = v
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


def python_report(cls, decomp, ccc):
    diffs: dict[str, list[int]] = {}
    for cp in code_points():
        c = chr(cp)
        cat = unicodedata.category(c)
        py = LETTER if cat.startswith("L") else NUMBER if cat.startswith("N") else SPACE if c.isspace() else OTHER
        if py != cls[cp]:
            diffs.setdefault("regex class (Python: category L*/N*, str.isspace)", []).append(cp)
        d = decomp.get(cp, hangul_decompose(cp) if S_BASE <= cp < S_BASE + S_COUNT else [cp])
        if [ord(x) for x in unicodedata.normalize("NFD", c)] != d:
            diffs.setdefault("NFD", []).append(cp)
        if cp not in decomp and unicodedata.combining(c) != ccc.get(cp, 0):
            diffs.setdefault("combining class", []).append(cp)
    return diffs


def clang_format() -> str:
    venv = os.environ.get("CN_VENV", os.path.join(os.environ.get("CN_CACHE", os.path.expanduser("~/.cache/cutenative")), "venv"))
    exe = os.path.join(venv, "bin", "clang-format")
    if not os.path.exists(exe):
        exe = shutil.which("clang-format") or ""
    assert exe, "no clang-format (scripts/setup.sh installs the pinned one into the venv)"
    return exe


def main():
    cls = probe_classes()
    folds = probe_folds()
    decomp, ccc, compose = probe_nfc()
    model = Model(cls, folds, decomp, ccc, compose)
    check_model(model)

    cat = {cp: cls[cp] | (NFC_CHECK if cp in model.check else 0) for cp in code_points()}
    assert all(cat[cp] == cls[cp] for cp in range(0x80)), "ASCII must be NFC-stable (the C++ fast path)"
    starts = starts_table(cat)
    pool: list[int] = []
    dentries = []
    for cp in sorted(decomp):
        dentries.append((cp, len(pool), len(decomp[cp])))
        pool.extend(decomp[cp])
    assert len(pool) < 65536
    ccc_ranges = ranges_of(ccc)
    comp = sorted((a, b, c) for (a, b), c in compose.items())

    head = [
        "// Generated by scripts/gen_bpe_unicode_tables.py -- do not edit by hand; re-run the script instead.\n",
        f"// Probed from HF tokenizers {tokenizers.__version__} (NFC: unicode-normalization-alignments; regex classes: "
        "Oniguruma),\n",
        f"// with Python {sys.version.split()[0]} (unicodedata {unicodedata.unidata_version}) used only for "
        "composition candidates and probe marks.\n",
        "// The script's docstring explains the sources and the layout.\n",
        '#include "core/tokenizers/bpe_unicode.h"\n\n',
        "namespace cn::text::bpe_unicode {\n\n",
    ]
    tail = ["}  // namespace cn::text::bpe_unicode\n"]
    classes = head + [
        f"// {len(starts)} ranges: first code point << 8 | (class | kNfcCheck).\n",
        f"const uint32_t kCategoryRanges[] = {{{', '.join(f'0x{cp << 8 | v:X}' for cp, v in starts)}}};\n",
        f"const size_t kCategoryCount = {len(starts)};\n\n",
        f"// {len(ccc_ranges)} ranges of one nonzero canonical combining class.\n",
        "const NfcCccRange kNfcCcc[] = {" + ", ".join(f"{{0x{lo:X}, 0x{hi:X}, {v}}}" for lo, hi, v in ccc_ranges) + "};\n",
        f"const size_t kNfcCccCount = {len(ccc_ranges)};\n\n",
        f"// {len(comp)} canonical compositions (Hangul excluded), sorted by (first, second).\n",
        "const NfcComposition kNfcCompose[] = {" + ", ".join(f"{{0x{a:X}, 0x{b:X}, 0x{c:X}}}" for a, b, c in comp) + "};\n",
        f"const size_t kNfcComposeCount = {len(comp)};\n\n",
        "// Non-ASCII chars the case-insensitive contraction group matches, and the letter each stands for.\n",
        "const FoldExtra kFoldExtra[] = {" + ", ".join(f"{{0x{cp:X}, '{x}'}}" for cp, x in sorted(folds.items())) + "};\n",
        f"const size_t kFoldExtraCount = {len(folds)};\n\n",
    ] + tail
    decomps = head + [
        f"// {len(dentries)} full canonical decompositions (Hangul syllables excluded), {len(pool)} pool entries.\n",
        "const NfcDecomposition kNfcDecomp[] = {" + ", ".join(f"{{0x{cp:X}, {o}, {n}}}" for cp, o, n in dentries) + "};\n",
        f"const size_t kNfcDecompCount = {len(dentries)};\n",
        "const uint32_t kNfcDecompPool[] = {" + ", ".join(f"0x{x:X}" for x in pool) + "};\n\n",
    ] + tail
    for path, body in ((OUT, classes), (OUT_DECOMP, decomps)):
        text = "".join(body)
        text = subprocess.run([clang_format(), "--assume-filename=" + path,
                               "--style=file:" + os.path.join(ROOT, ".clang-format")],
                              input=text, capture_output=True, text=True, check=True).stdout
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {path}: {len(text)} bytes, {text.count(chr(10))} lines")
    print(f"{len(starts)} class ranges, {len(dentries)} decompositions, {len(ccc_ranges)} ccc ranges, "
          f"{len(comp)} compositions, {len(folds)} extra folds")
    print(f"tokenizers {tokenizers.__version__}; Python {sys.version.split()[0]}, unicodedata {unicodedata.unidata_version}")
    print("Where tables built from Python's unicodedata would differ from the reference:")
    for kind, cps in python_report(cls, decomp, ccc).items():
        print(f"  {kind}: {len(cps)} code points, e.g. " + " ".join(f"U+{cp:04X}" for cp in cps[:12]))


if __name__ == "__main__":
    main()
