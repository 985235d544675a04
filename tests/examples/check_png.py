#!/usr/bin/env python3
"""ctest: the C image example (cn_generate_png) writes a valid PNG holding the reference's image for a Z-Image
fixture case (tests/fixtures/zimage/cases.json; the image is `<case>.image`, U8 [H, W, 3], in
reference/<config>.safetensors).

    check_png.py <cn_generate_png> <fixtures dir> [case name]     run the example on the case, check its PNG
    check_png.py --png <file.png> <fixtures dir> <case name>      check a PNG written by hand

The case must be one the example can express: no negative prompt and guidance 0 (the model's default). The
pipeline directory is assembled in a temporary directory as tests/models/zimage/zimage_fixture.h does (the
fixture's components linked, tokenizer/ linking the real Qwen3 files of CN_QWEN_TOKENIZER_DIR); without them the
test is skipped (exit status 77), or fails when CN_REQUIRE_QWEN_TOKENIZER=1.

The PNG is parsed chunk by chunk (every CRC-32 checked), its IDAT data inflated with zlib (which checks the
Adler-32) and unfiltered; at least 99.9 % of the values must be within 1 level of the reference (the C++ and Go
parity tests' bound). Standard library only."""
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

SKIP = 77


def read_png(path):
    """(width, height, rows of RGB bytes) of an 8-bit RGB PNG; raises ValueError on anything else."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG signature")
    pos, chunks = 8, []
    while pos < len(data):
        if pos + 12 > len(data):
            raise ValueError(f"truncated chunk at byte {pos}")
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if len(body) != length or pos + 12 + length > len(data):
            raise ValueError(f"chunk {kind!r} runs past the end of the file")
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        if zlib.crc32(kind + body) != crc:
            raise ValueError(f"chunk {kind!r} at byte {pos}: CRC {crc:08x}, computed {zlib.crc32(kind + body):08x}")
        chunks.append((kind, body))
        pos += 12 + length
    kinds = [k for k, _ in chunks]
    if not kinds or kinds[0] != b"IHDR" or kinds[-1] != b"IEND" or b"IDAT" not in kinds:
        raise ValueError(f"chunk order {kinds}")
    w, h, depth, colour, compression, filtering, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    if (depth, colour, compression, filtering, interlace) != (8, 2, 0, 0, 0):
        raise ValueError(f"IHDR {depth=} {colour=} {compression=} {filtering=} {interlace=}: want 8-bit RGB")
    raw = zlib.decompress(b"".join(b for k, b in chunks if k == b"IDAT"))
    stride = 3 * w
    if len(raw) != h * (stride + 1):
        raise ValueError(f"{len(raw)} inflated bytes for {w}x{h}")
    rows, prev = [], bytearray(stride)
    for y in range(h):
        ftype, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - 3] if i >= 3 else 0
            b, c = prev[i], prev[i - 3] if i >= 3 else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 0xFF
            elif ftype == 2:
                line[i] = (line[i] + b) & 0xFF
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
            elif ftype != 0:
                raise ValueError(f"row {y}: filter type {ftype}")
        rows.append(bytes(line))
        prev = line
    return w, h, rows, kinds


def reference_image(fixtures, case):
    """The U8 tensor `<case>.image` of reference/<config>.safetensors: (bytes, shape)."""
    path = os.path.join(fixtures, "zimage", "reference", case["config"] + ".safetensors")
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        info = header[case["name"] + ".image"]
        begin, end = info["data_offsets"]
        assert info["dtype"] == "U8", info
        f.seek(8 + n + begin)
        return f.read(end - begin), info["shape"]


def assemble_pipeline(fixtures, config, tokenizer_dir, into):
    src = os.path.abspath(os.path.join(fixtures, "zimage", config))
    dst = os.path.join(into, config)
    os.makedirs(os.path.join(dst, "tokenizer"))
    for name in os.listdir(src):
        if name != "tokenizer":
            os.symlink(os.path.join(src, name), os.path.join(dst, name))
    for d in ([os.path.join(src, "tokenizer")] if os.path.isdir(os.path.join(src, "tokenizer")) else []) + [tokenizer_dir]:
        for name in os.listdir(d):
            if not os.path.lexists(os.path.join(dst, "tokenizer", name)):
                os.symlink(os.path.abspath(os.path.join(d, name)), os.path.join(dst, "tokenizer", name))
    return dst


def compare(png_path, fixtures, case):
    w, h, rows, kinds = read_png(png_path)
    if (w, h) != (case["width"], case["height"]):
        sys.exit(f"PNG is {w}x{h}, case {case['name']} is {case['width']}x{case['height']}")
    ref, shape = reference_image(fixtures, case)
    if shape != [h, w, 3]:
        sys.exit(f"reference image of shape {shape} for {w}x{h}")
    got = b"".join(rows)
    diffs = [abs(a - b) for a, b in zip(got, ref)]
    off = sum(d > 1 for d in diffs)
    if off > 0.001 * len(diffs):
        sys.exit(f"{off} of {len(diffs)} values differ from the reference by more than 1 level (worst {max(diffs)})")
    print(f"{os.path.basename(png_path)}: {w}x{h} RGB8, chunks {[k.decode() for k in kinds]}, CRCs and Adler-32 valid; "
          f"{case['name']}: {len(diffs)} values, {off} beyond 1 level of the reference, worst {max(diffs)}")


def main(argv):
    by_hand = argv[:1] == ["--png"]
    if by_hand:
        argv = argv[1:]
    if len(argv) < 2 + by_hand or len(argv) > 3:
        sys.exit(__doc__)
    target, fixtures = argv[0], argv[1]
    name = argv[2] if len(argv) > 2 else "a_turbo_32x48"
    cases = json.load(open(os.path.join(fixtures, "zimage", "cases.json")))["cases"]
    case = next((c for c in cases if c["name"] == name), None)
    if case is None:
        sys.exit(f"no Z-Image case {name!r}")
    if by_hand:
        compare(target, fixtures, case)
        return 0
    if case["negative_prompt"] is not None or case["guidance"] != 0:
        sys.exit(f"case {name}: the example sets no negative prompt and the model's default guidance (0)")
    tok = os.environ.get("CN_QWEN_TOKENIZER_DIR", "")
    if not tok or not os.path.isfile(os.path.join(tok, "tokenizer.json")):
        if os.environ.get("CN_REQUIRE_QWEN_TOKENIZER") == "1":
            sys.exit("CN_REQUIRE_QWEN_TOKENIZER=1 but CN_QWEN_TOKENIZER_DIR does not hold tokenizer.json")
        print("SKIPPED: set CN_QWEN_TOKENIZER_DIR to the Qwen3 tokenizer files (scripts/env.sh)")
        return SKIP
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = assemble_pipeline(fixtures, case["config"], tok, tmp)
        png_path = os.path.join(tmp, case["name"] + ".png")
        cmd = [target, model_dir, case["prompt"], png_path, str(case["width"]), str(case["height"]), str(case["steps"]),
               str(case["seed"])]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"the example failed ({r.returncode}): {r.stdout}{r.stderr}")
        print(r.stdout, end="")
        compare(png_path, fixtures, case)
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
