#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_bpe (tests/fuzz/corpus_bpe/). Standard library only.

Each file is one selector byte (0 encode with the tiny tokenizer, 1 encode with the real one, 2 NFC and the
pre-tokenizer split, 3 a tokenizer.json to load) followed by the input: texts with what the tokenizer treats
specially (added tokens, contractions, whitespace runs, marks NFC composes, Hangul jamo, emoji) and near-misses."""
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus_bpe")
os.makedirs(out, exist_ok=True)


def write(name: str, selector: int, body: bytes) -> None:
    with open(os.path.join(out, name), "wb") as f:
        f.write(bytes([selector]) + body)


texts = {
    "prompt": "A photo of an astronaut riding a horse on Mars, 8k, f/1.8 --ar 16:9",
    "chat": "<|im_start|>user\na cat<|im_end|>\n<|im_start|>assistant\n",
    "added": "a<|im_end|>b<|im_end|>x|im abcd e\u0301! \u00c5ngstr\u00f6m \u212b <|im_",
    "contractions": "it's IT'S we're 'LL 'Ve '\u017f don't '",
    "whitespace": "a  b\t\tc \n\n d\r\n\r\n  \u00a0\u3000e   ",
    "marks": "e\u0301\u0323 a\u0323\u0301 \u1100\u1161\u11a8 \uac00\u11a8 \u0344 \u0f73 q\u0307\u0323",
    "cjk": "\u4e2d\u6587 \u3072\u3089\u304c\u306a \ud55c\uad6d\uc5b4 \uff76\uff80\uff76\uff85",
    "emoji": "\U0001F469\u200d\U0001F680 \U0001F44D\U0001F3FD \U0001F1EF\U0001F1F5 #\ufe0f\u20e3",
    "digits": "1234567890 \u0660\u0661 \u00b2\u00bd \u216b",
    "controls": "x\x00y\x0b\x0c\x1c\x85",
}
for name, s in texts.items():
    write("tiny_" + name, 0, s.encode())
    write("real_" + name, 1, s.encode())
    write("text_" + name, 2, s.encode())
write("tiny_invalid", 0, b"ok \xc3\x28 \xed\xa0\x80 \xf0\x9f\x98")
write("real_invalid", 1, b"<|im_end|>\xff")
write("tiny_long_word", 0, b"a" * 3000)
write("real_long_marks", 1, b"e" + "\u0301\u0323".encode() * 500)

tiny = json.load(open(os.path.join(here, "..", "fixtures", "qwen_tokenizer", "tiny_tokenizer.json"), encoding="utf-8"))
write("json_tiny", 3, json.dumps(tiny, ensure_ascii=False).encode())
legacy = dict(tiny, model=dict(tiny["model"], merges=[" ".join(m) for m in tiny["model"]["merges"]]))
write("json_legacy_merges", 3, json.dumps(legacy, ensure_ascii=False).encode())
write("json_nfkc", 3, json.dumps(dict(tiny, normalizer={"type": "NFKC"})).encode())
write("json_no_model", 3, b'{"normalizer": null, "pre_tokenizer": null}')
print(f"wrote corpus to {out}")
