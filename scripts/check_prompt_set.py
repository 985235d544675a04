#!/usr/bin/env python3
"""Validate the LoRA routing prompt set against the LoRA catalog.

Checks (any failure -> exit status 1):
  * the catalog is well formed (names snake_case and unique, path
    loras/<name>.safetensors, 3-8 triggers, non-empty positive/negative);
  * every line of the prompt file is a JSON object with exactly the keys
    id, prompt, label, split, keyword_free;
  * ids look like p0001 and are unique; prompts are unique (case and
    whitespace insensitive);
  * every label is a catalog LoRA name or "none"; split is dev or test;
  * prompts are 3..40 words long;
  * keyword_free is correct: for a style label it is true iff the prompt
    contains none of that style's triggers (case-insensitive substring);
    for "none" it is true iff the prompt contains no trigger of any style;
  * the split is the documented one: within each (label, keyword_free)
    stratum, prompts ordered by sha256(prompt utf-8) hex digest, the first
    round(0.35 * n) are dev, the rest test;
  * minimum sizes: >= 340 prompts, >= 20 per style, >= 70 "none", every
    label present in both splits, >= 70% of style-labelled prompts
    keyword_free.

Prints a per-label table (use --markdown for a Markdown table).

With --holdout, checks the holdout set (go/lora/testdata/prompts_holdout.jsonl)
instead: the same schema, word-count and keyword_free checks, but ids look
like h0001 (contiguous from h0001), split is "holdout", there is no dev/test
rule, and no prompt may repeat one in the holdout file or in prompts.jsonl
(case and whitespace insensitive). Minimum sizes: >= 270 prompts, >= 15 per
style, >= 60 "none", >= 70% of style-labelled prompts keyword_free.
Standard library only.
"""
import argparse
import collections
import hashlib
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CATALOG = os.path.join(ROOT, "go", "lora", "catalogs", "default.json")
DEFAULT_PROMPTS = os.path.join(ROOT, "go", "lora", "testdata", "prompts.jsonl")
DEFAULT_HOLDOUT = os.path.join(ROOT, "go", "lora", "testdata", "prompts_holdout.jsonl")

DEV_FRACTION = 0.35
MIN_TOTAL = 340
MIN_PER_STYLE = 20
MIN_NONE = 70
MIN_KEYWORD_FREE = 0.70
MIN_WORDS, MAX_WORDS = 3, 40
KEYS = {"id", "prompt", "label", "split", "keyword_free"}
HOLDOUT_MIN_TOTAL = 270
HOLDOUT_MIN_PER_STYLE = 15
HOLDOUT_MIN_NONE = 60


def hits(text, triggers):
    t = text.lower()
    return [g for g in triggers if g.lower() in t]


def expected_dev(prompts):
    order = sorted(prompts, key=lambda s: hashlib.sha256(s.encode("utf-8")).hexdigest())
    return set(order[: int(len(prompts) * DEV_FRACTION + 0.5)])


def check_catalog(cat, errors):
    for k in ("negative_weight", "threshold", "loras"):
        if k not in cat:
            errors.append("catalog: missing key %r" % k)
    names = set()
    for i, l in enumerate(cat.get("loras", [])):
        name = l.get("name", "")
        where = "catalog lora #%d (%s)" % (i, name)
        if not re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", name):
            errors.append("%s: name is not snake_case" % where)
        if name in names:
            errors.append("%s: duplicate name" % where)
        names.add(name)
        if l.get("path") != "loras/%s.safetensors" % name:
            errors.append("%s: path should be loras/%s.safetensors" % (where, name))
        if not isinstance(l.get("scale"), (int, float)):
            errors.append("%s: scale must be a number" % where)
        for k in ("positive", "negative"):
            if not isinstance(l.get(k), str) or not l.get(k).strip():
                errors.append("%s: empty %s" % (where, k))
        tr = l.get("triggers")
        if not isinstance(tr, list) or not 3 <= len(tr) <= 8 or not all(isinstance(g, str) and g.strip() for g in tr):
            errors.append("%s: triggers must be 3-8 non-empty strings" % where)
    return names


def read_prompts(path, names, trig, all_trig, errors, id_re, splits, other=None, other_name=""):
    """Read and check one prompt file; return (rows, {normalised prompt: id})."""
    rows, ids, seen = [], set(), {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                errors.append("line %d: empty line" % n)
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                errors.append("line %d: bad JSON: %s" % (n, e))
                continue
            if not isinstance(r, dict) or set(r) != KEYS:
                errors.append("line %d: keys must be exactly %s" % (n, sorted(KEYS)))
                continue
            rid, p, lab = r["id"], r["prompt"], r["label"]
            if not isinstance(rid, str) or not re.fullmatch(id_re, rid):
                errors.append("line %d: bad id %r" % (n, rid))
            elif rid in ids:
                errors.append("line %d: duplicate id %s" % (n, rid))
            ids.add(rid)
            if not isinstance(p, str) or not p.strip():
                errors.append("line %d (%s): empty prompt" % (n, rid))
                continue
            key = " ".join(p.lower().split())
            if key in seen:
                errors.append("line %d (%s): duplicate prompt of %s" % (n, rid, seen[key]))
            if other and key in other:
                errors.append("line %d (%s): duplicate of %s in %s" % (n, rid, other[key], other_name))
            seen[key] = rid
            if p != p.strip():
                errors.append("%s: leading/trailing whitespace" % rid)
            nw = len(p.split())
            if not MIN_WORDS <= nw <= MAX_WORDS:
                errors.append("%s: %d words (want %d..%d)" % (rid, nw, MIN_WORDS, MAX_WORDS))
            if lab != "none" and lab not in names:
                errors.append("%s: label %r not in catalog" % (rid, lab))
                continue
            if r["split"] not in splits:
                errors.append("%s: split %r" % (rid, r["split"]))
            if not isinstance(r["keyword_free"], bool):
                errors.append("%s: keyword_free must be a boolean" % rid)
            h = hits(p, all_trig if lab == "none" else trig[lab])
            if r["keyword_free"] != (not h):
                errors.append("%s: keyword_free=%s but triggers found: %s" % (rid, r["keyword_free"], h or "none"))
            rows.append(r)
    return rows, seen


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--catalog", default=DEFAULT_CATALOG)
    ap.add_argument("--prompts", default=DEFAULT_PROMPTS)
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--cross", action="store_true",
                    help="list prompts that contain another style's trigger (informational)")
    ap.add_argument("--holdout", action="store_true",
                    help="check the holdout set instead (see --holdout-file); --prompts is then "
                         "the frozen set it must not repeat")
    ap.add_argument("--holdout-file", default=DEFAULT_HOLDOUT)
    args = ap.parse_args()

    errors = []
    with open(args.catalog, encoding="utf-8") as f:
        cat = json.load(f)
    names = check_catalog(cat, errors)
    trig = {l["name"]: l.get("triggers", []) for l in cat.get("loras", [])}
    all_trig = [g for ts in trig.values() for g in ts]
    labels = [l["name"] for l in cat.get("loras", [])] + ["none"]

    if args.holdout:
        return check_holdout(args, names, trig, all_trig, labels, errors)
    rows, _ = read_prompts(args.prompts, names, trig, all_trig, errors, r"p\d{4}", ("dev", "test"))

    by_label = collections.defaultdict(list)
    strata = collections.defaultdict(list)
    for r in rows:
        by_label[r["label"]].append(r)
        strata[(r["label"], r["keyword_free"])].append(r)
    for rs in strata.values():
        dev = expected_dev([r["prompt"] for r in rs])
        for r in rs:
            want = "dev" if r["prompt"] in dev else "test"
            if r["split"] != want:
                errors.append("%s: split is %s, documented rule gives %s" % (r["id"], r["split"], want))

    # table
    table = []
    for lab in labels:
        rs = by_label.get(lab, [])
        d = sum(r["split"] == "dev" for r in rs)
        kf = sum(r["keyword_free"] for r in rs)
        kfd = sum(r["keyword_free"] and r["split"] == "dev" for r in rs)
        table.append((lab, len(rs), d, len(rs) - d, kf, kfd, kf - kfd))
        need = MIN_NONE if lab == "none" else MIN_PER_STYLE
        if len(rs) < need:
            errors.append("label %s: %d prompts (want >= %d)" % (lab, len(rs), need))
        if rs and (d == 0 or d == len(rs)):
            errors.append("label %s: not present in both splits" % lab)
    hdr = ("label", "total", "dev", "test", "keyword_free", "kf dev", "kf test")
    report(args, rows, table, hdr, (6, 5, 5, 13, 7, 8), MIN_TOTAL, "prompts", errors)
    return finish(args, rows, trig, errors)


def report(args, rows, table, hdr, widths, min_total, what, errors):
    """Checks the totals and prints the per-label table (Markdown or fixed columns of these widths after the
    label) and the prompt statistics."""
    style = [r for r in rows if r["label"] != "none"]
    kf_style = sum(r["keyword_free"] for r in style)
    frac = kf_style / len(style) if style else 0.0
    if len(rows) < min_total:
        errors.append("total %d prompts (want >= %d)" % (len(rows), min_total))
    if frac < MIN_KEYWORD_FREE:
        errors.append("keyword_free fraction of style prompts %.3f (want >= %.2f)" % (frac, MIN_KEYWORD_FREE))

    cols = len(hdr) - 1
    tot = [sum(t[i] for t in table) for i in range(1, cols + 1)]
    if args.markdown:
        print("| " + " | ".join(hdr) + " |")
        print("|" + "|".join(["---"] + ["---:"] * cols) + "|")
        for t in table:
            print(("| `%s` |" + " %d |" * cols) % t)
        print(("| **all** |" + " %d |" * cols) % tuple(tot))
    else:
        print(("%-16s" + "".join(" %%%ds" % w for w in widths)) % hdr)
        row = "%-16s" + "".join(" %%%dd" % w for w in widths)
        for t in table:
            print(row % t)
        print(row % (("all",) + tuple(tot)))
    words = [len(r["prompt"].split()) for r in rows]
    print()
    print("%s: %d  style-labelled: %d  keyword_free among style-labelled: %d (%.1f%%)"
          % (what, len(rows), len(style), kf_style, 100 * frac))
    if words:
        print("words per prompt: min %d  median %d  max %d"
              % (min(words), sorted(words)[len(words) // 2], max(words)))


def finish(args, rows, trig, errors):
    if args.cross:
        print()
        print("prompts containing another style's trigger (informational):")
        for r in rows:
            other = {lab: hits(r["prompt"], ts) for lab, ts in trig.items() if lab != r["label"]}
            other = {k: v for k, v in other.items() if v}
            if other and r["label"] != "none":
                print("  %s [%s] %s -> %s" % (r["id"], r["label"], r["prompt"], other))

    if errors:
        print()
        print("FAILED: %d problem(s)" % len(errors))
        for e in errors:
            print("  " + e)
        return 1
    print("OK")
    return 0


def check_holdout(args, names, trig, all_trig, labels, errors):
    # The frozen set is only read for its prompts; its own problems are not reported here.
    _, frozen = read_prompts(args.prompts, names, trig, all_trig, [], r"p\d{4}", ("dev", "test"))
    rows, _ = read_prompts(args.holdout_file, names, trig, all_trig, errors, r"h\d{4}", ("holdout",),
                           other=frozen, other_name=os.path.basename(args.prompts))
    want_ids = ["h%04d" % i for i in range(1, len(rows) + 1)]
    if sorted(r["id"] for r in rows) != want_ids:
        errors.append("ids are not contiguous h0001..h%04d" % len(rows))

    by_label = collections.defaultdict(list)
    for r in rows:
        by_label[r["label"]].append(r)
    table = []
    for lab in labels:
        rs = by_label.get(lab, [])
        kf = sum(r["keyword_free"] for r in rs)
        table.append((lab, len(rs), kf, len(rs) - kf))
        need = HOLDOUT_MIN_NONE if lab == "none" else HOLDOUT_MIN_PER_STYLE
        if len(rs) < need:
            errors.append("label %s: %d prompts (want >= %d)" % (lab, len(rs), need))
    hdr = ("label", "total", "keyword_free", "with keyword")
    report(args, rows, table, hdr, (6, 13, 13), HOLDOUT_MIN_TOTAL, "holdout prompts", errors)
    return finish(args, rows, trig, errors)


if __name__ == "__main__":
    sys.exit(main())
