#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_format (tests/fuzz/corpus/). Standard library only.

Each file is one selector byte (0 safetensors, 1 shard index, 2 config.json, 3 strict JSON, 4 WordPiece
text, 5 WordPiece vocabulary) followed by
the parser's input: valid files of each kind plus a few near-misses, so the fuzzer starts from the
structures that matter."""
import json
import os
import struct
import sys

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus")
os.makedirs(out, exist_ok=True)


def st(header: dict, data: bytes) -> bytes:
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def write(name: str, selector: int, body: bytes) -> None:
    with open(os.path.join(out, name), "wb") as f:
        f.write(bytes([selector]) + body)


f32 = struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)
write("st_valid", 0, st({"__metadata__": {"format": "pt"}, "w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}, f32))
write("st_two", 0, st({"a": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]},
                       "b": {"dtype": "I64", "shape": [], "data_offsets": [4, 12]}}, bytes(12)))
write("st_empty", 0, st({}, b""))
write("st_overlap", 0, st({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                           "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, bytes(12)))
write("st_badlen", 0, struct.pack("<Q", 1 << 40) + b"{}")
write("index_valid", 1, json.dumps({"metadata": {"total_size": 16},
                                    "weight_map": {"a": "model-00001-of-00002.safetensors",
                                                   "b": "model-00002-of-00002.safetensors"}}).encode())
write("index_traversal", 1, json.dumps({"weight_map": {"a": "../x.safetensors"}}).encode())
chronos = {
    "architectures": ["Chronos2Model"], "model_type": "t5", "d_model": 768, "d_kv": 64, "d_ff": 3072,
    "num_layers": 12, "num_heads": 12, "layer_norm_epsilon": 1e-6, "feed_forward_proj": "relu",
    "rope_theta": 10000.0, "vocab_size": 2,
    "chronos_config": {"context_length": 8192, "input_patch_size": 16, "input_patch_stride": 16,
                       "output_patch_size": 16, "max_output_patches": 64,
                       "quantiles": [0.01, 0.05, 0.1, 0.5, 0.9, 0.95, 0.99],
                       "use_reg_token": True, "use_arcsinh": True, "time_encoding_scale": 8192},
}
write("config_chronos2", 2, json.dumps(chronos).encode())
write("config_other", 2, json.dumps({"architectures": ["BertModel"], "hidden_size": 384}).encode())
write("json_nested", 3, b'{"a":[1,2.5e-3,"x\\u00e9",null,true,{"b":{}}]}')
write("json_dup", 3, b'{"a":1,"a":2}')
print(f"wrote corpus to {out}")
write("wp_text", 4, "The knights shining, a b c! 中文 é \u00e9\u0301 [MASK] x[PAD]y\t\n".encode())
write("wp_invalid_utf8", 4, b"ok \xc3\x28 \xf0\x9f\x98")
write("wp_long_word", 4, b"a" * 150 + b" the")
write("wp_vocab", 5, b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n##lo\n")
write("wp_vocab_dup", 5, b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nx\nx\n")
