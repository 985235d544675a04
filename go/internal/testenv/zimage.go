package testenv

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// QwenTokenizerDir returns $CN_QWEN_TOKENIZER_DIR, the real Qwen3 tokenizer files the Z-Image fixture pipelines
// lack (scripts/env.sh: cn_qwen_tokenizer_dir). Without tokenizer.json there the test is skipped, or fails when
// CN_REQUIRE_QWEN_TOKENIZER=1 (scripts/test.sh sets it, so CI cannot skip).
func QwenTokenizerDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("CN_QWEN_TOKENIZER_DIR")
	if dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err == nil {
			return dir
		}
	}
	if os.Getenv("CN_REQUIRE_QWEN_TOKENIZER") == "1" {
		t.Fatalf("CN_REQUIRE_QWEN_TOKENIZER=1 but CN_QWEN_TOKENIZER_DIR (%q) does not hold tokenizer.json", dir)
	}
	t.Skip("SKIPPED: set CN_QWEN_TOKENIZER_DIR to the Qwen3 tokenizer files (scripts/env.sh: cn_qwen_tokenizer_dir)")
	return ""
}

// ZImagePipeline assembles the complete pipeline directory of a Z-Image fixture config (src:
// tests/fixtures/zimage/<config>, which leaves out the 16 MB tokenizer files) in a temporary directory, as
// tests/models/zimage/zimage_fixture.h does: every component linked, and tokenizer/ holding the fixture's own
// tokenizer files, if any, plus links to the real Qwen3 tokenizer files. Skips like QwenTokenizerDir.
func ZImagePipeline(t testing.TB, src string) string {
	t.Helper()
	tok := QwenTokenizerDir(t)
	src, err := filepath.Abs(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.MkdirAll(filepath.Join(dst, "tokenizer"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := func(dir, into string) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			target := filepath.Join(into, e.Name())
			if e.Name() == "tokenizer" && into == dst {
				continue
			}
			if _, err := os.Lstat(target); err == nil {
				continue // the fixture's own file wins
			}
			if err := os.Symlink(filepath.Join(dir, e.Name()), target); err != nil {
				t.Fatal(err)
			}
		}
	}
	link(src, dst)
	if _, err := os.Stat(filepath.Join(src, "tokenizer")); err == nil {
		link(filepath.Join(src, "tokenizer"), filepath.Join(dst, "tokenizer"))
	}
	link(tok, filepath.Join(dst, "tokenizer"))
	return dst
}

// SafetensorsU8 reads the U8 tensor `name` of a safetensors file: its bytes and shape.
func SafetensorsU8(t testing.TB, path, name string) ([]byte, []int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 8 {
		t.Fatalf("%s: too short for a safetensors file", path)
	}
	n := binary.LittleEndian.Uint64(b)
	if n > uint64(len(b)-8) {
		t.Fatalf("%s: header of %d bytes in a file of %d", path, n, len(b))
	}
	var header map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &header); err != nil {
		t.Fatalf("%s: header: %v", path, err)
	}
	raw, ok := header[name]
	if !ok {
		t.Fatalf("%s: no tensor %q", path, name)
	}
	var info struct {
		DType   string   `json:"dtype"`
		Shape   []int64  `json:"shape"`
		Offsets []uint64 `json:"data_offsets"`
	}
	if err := json.Unmarshal(raw, &info); err != nil {
		t.Fatalf("%s: %s: %v", path, name, err)
	}
	count := uint64(1)
	for _, d := range info.Shape {
		count *= uint64(d)
	}
	data := b[8+n:]
	if info.DType != "U8" || len(info.Offsets) != 2 || info.Offsets[0] > info.Offsets[1] || info.Offsets[1] > uint64(len(data)) || info.Offsets[1]-info.Offsets[0] != count {
		t.Fatalf("%s: %s: dtype %s, shape %v, offsets %v: not a U8 tensor in the file", path, name, info.DType, info.Shape, info.Offsets)
	}
	return data[info.Offsets[0]:info.Offsets[1]], info.Shape
}
