package lora

import (
	"bufio"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

const minimalEntry = `{"name": "a", "path": "a.safetensors", "scale": 0.8, "positive": "apples"}`

func TestParseCatalogValid(t *testing.T) {
	c, err := ParseCatalog([]byte(`{"loras": [` + minimalEntry + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.NegativeWeight != DefaultNegativeWeight || c.Threshold != DefaultThreshold || c.ExampleWeight != DefaultExampleWeight {
		t.Fatalf("defaults: %+v", c)
	}
	if len(c.Entries) != 1 || !reflect.DeepEqual(c.Entries[0], Entry{Name: "a", Path: "a.safetensors", Scale: 0.8, Positive: "apples"}) {
		t.Fatalf("entries: %+v", c.Entries)
	}
	c, err = ParseCatalog([]byte(`{"negative_weight": 0, "example_weight": 0.5, "threshold": -0.5, "loras": [
		{"name": "a", "path": "p", "scale": -1, "positive": "x", "negative": "  ", "triggers": ["t"]},
		{"name": "b", "path": "p", "scale": 2, "positive": "y", "negative": "not y", "triggers": [],
		 "examples": ["a y at dawn", "two ys"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.NegativeWeight != 0 || c.ExampleWeight != 0.5 || c.Threshold != -0.5 || c.Entries[0].Negative != "" || c.Entries[1].Negative != "not y" ||
		c.Entries[0].Examples != nil || !reflect.DeepEqual(c.Entries[1].Examples, []string{"a y at dawn", "two ys"}) {
		t.Fatalf("parsed %+v", c)
	}
}

func TestParseCatalogRejects(t *testing.T) {
	entry := func(fields string) string { return `{"loras": [{` + fields + `}]}` }
	tests := []struct{ name, doc, want string }{
		{"not JSON", `{"loras": [`, "malformed JSON"},
		{"not an object", `[1]`, "must be a JSON object"},
		{"trailing data", `{"loras": [` + minimalEntry + `]} {}`, "trailing data"},
		{"trailing bracket", `{"loras": [` + minimalEntry + `]}]`, "malformed JSON"},
		{"duplicate key", `{"threshold": 0.1, "threshold": 0.2, "loras": [` + minimalEntry + `]}`, `duplicate key "threshold"`},
		{"duplicate key in entry", entry(`"name": "a", "name": "b", "path": "p", "scale": 1, "positive": "x"`), `duplicate key "name"`},
		{"unknown top-level field", `{"loras": [` + minimalEntry + `], "temperature": 1}`, "unknown field"},
		{"unknown entry field", entry(`"name": "a", "path": "p", "scale": 1, "positive": "x", "weight": 2`), "unknown field"},
		{"no loras", `{}`, "at least one entry"},
		{"empty loras", `{"loras": []}`, "at least one entry"},
		{"loras not a list", `{"loras": {}}`, `field "loras"`},
		{"missing name", entry(`"path": "p", "scale": 1, "positive": "x"`), "loras[0].name: required"},
		{"empty name", entry(`"name": "", "path": "p", "scale": 1, "positive": "x"`), "name: required and non-empty"},
		{"null name", entry(`"name": null, "path": "p", "scale": 1, "positive": "x"`), "name: required"},
		{"padded name", entry(`"name": " a", "path": "p", "scale": 1, "positive": "x"`), "white space"},
		{"control in name", entry(`"name": "a\u0007", "path": "p", "scale": 1, "positive": "x"`), "control character"},
		{"duplicate names", `{"loras": [` + minimalEntry + `,` + minimalEntry + `]}`, "duplicate of loras[0]"},
		{"missing path", entry(`"name": "a", "scale": 1, "positive": "x"`), "path: required"},
		{"blank path", entry(`"name": "a", "path": " ", "scale": 1, "positive": "x"`), "path: required and non-empty"},
		{"missing scale", entry(`"name": "a", "path": "p", "positive": "x"`), "scale: required"},
		{"scale as string", entry(`"name": "a", "path": "p", "scale": "1", "positive": "x"`), `field "loras.scale"`},
		{"overflowing scale", entry(`"name": "a", "path": "p", "scale": 1e400, "positive": "x"`), "scale"},
		{"missing positive", entry(`"name": "a", "path": "p", "scale": 1`), "positive: required"},
		{"blank positive", entry(`"name": "a", "path": "p", "scale": 1, "positive": " \n"`), "positive: required and non-empty"},
		{"NUL in positive", entry(`"name": "a", "path": "p", "scale": 1, "positive": "x\u0000y"`), "NUL"},
		{"NUL in negative", entry(`"name": "a", "path": "p", "scale": 1, "positive": "x", "negative": "\u0000"`), "NUL"},
		{"empty trigger", entry(`"name": "a", "path": "p", "scale": 1, "positive": "x", "triggers": [""]`), "triggers[0]: empty"},
		{"blank example", entry(`"name": "a", "path": "p", "scale": 1, "positive": "x", "examples": ["y", " "]`), "examples[1]: empty"},
		{"NUL in an example", entry(`"name": "a", "path": "p", "scale": 1, "positive": "x", "examples": ["\u0000"]`), "examples[0]: contains a NUL"},
		{"examples not a list", entry(`"name": "a", "path": "p", "scale": 1, "positive": "x", "examples": "y"`), `field "loras.examples"`},
		{"too many examples", entry(`"name": "a", "path": "p", "scale": 1, "positive": "x", "examples": [` +
			strings.TrimSuffix(strings.Repeat(`"e", `, 65), ", ") + `]`), "examples: 65 exceed the limit of 64"},
		{"negative weight below 0", `{"negative_weight": -0.1, "loras": [` + minimalEntry + `]}`, "negative_weight"},
		{"example weight below 0", `{"example_weight": -1, "loras": [` + minimalEntry + `]}`, "example_weight: must be a finite number >= 0"},
		{"weight overflow", `{"negative_weight": 1e999, "loras": [` + minimalEntry + `]}`, "negative_weight"},
		{"threshold as string", `{"threshold": "0.3", "loras": [` + minimalEntry + `]}`, `field "threshold"`},
		{"deep nesting", `{"loras": [` + minimalEntry + `], "x": [[[[[[[[[[1]]]]]]]]]]}`, "nested deeper"},
		{"invalid UTF-8", "{\"loras\": [{\"name\": \"\xff\", \"path\": \"p\", \"scale\": 1, \"positive\": \"x\"}]}", "UTF-8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCatalog([]byte(tc.doc))
			if !errors.Is(err, ErrInvalidCatalog) {
				t.Fatalf("error %v, want ErrInvalidCatalog", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func TestCatalogLimits(t *testing.T) {
	lim := DefaultLimits
	lim.MaxEntries, lim.MaxTextBytes, lim.MaxTriggers, lim.MaxNameBytes, lim.MaxFileBytes = 2, 10, 1, 3, 400
	tests := []struct{ name, doc, want string }{
		{"entries", `{"loras": [` + minimalEntry + `,` + strings.Replace(minimalEntry, `"a"`, `"b"`, 1) + `,` +
			strings.Replace(minimalEntry, `"a"`, `"c"`, 1) + `]}`, "3 entries exceed the limit of 2"},
		{"text", `{"loras": [{"name": "a", "path": "p", "scale": 1, "positive": "01234567890"}]}`, "11 bytes exceed the limit of 10"},
		{"triggers", `{"loras": [{"name": "a", "path": "p", "scale": 1, "positive": "x", "triggers": ["a", "b"]}]}`, "2 exceed the limit of 1"},
		{"name", `{"loras": [{"name": "abcd", "path": "p", "scale": 1, "positive": "x"}]}`, "4 bytes exceed"},
		{"file", `{"loras": [` + minimalEntry + `]}` + strings.Repeat(" ", 400), "larger than 400 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseCatalog([]byte(tc.doc), lim)
			if !errors.Is(err, ErrInvalidCatalog) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	// LoadCatalog reads no more than the limit.
	path := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(path, []byte(`{"loras": [`+minimalEntry+`]}`+strings.Repeat(" ", 1000)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadCatalog(path, lim); !errors.Is(err, ErrInvalidCatalog) || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("big file: %v", err)
	}
	if _, err := LoadCatalog(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestValidateCatalogBuiltInCode(t *testing.T) {
	ok := Catalog{Threshold: 0.2, Entries: []Entry{{Name: "a", Path: "p", Scale: 1, Positive: "x"}}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []func(c *Catalog){
		func(c *Catalog) { c.Entries = nil },
		func(c *Catalog) { c.NegativeWeight = -1 },
		func(c *Catalog) { c.Threshold = math.Inf(1) },
		func(c *Catalog) { c.Entries[0].Scale = math.NaN() },
		func(c *Catalog) { c.Entries = append(c.Entries, c.Entries[0]) },
		func(c *Catalog) { c.Entries[0].Positive = "" },
		func(c *Catalog) { c.Entries[0].Name = "" },
	}
	for i, f := range bad {
		c := ok
		c.Entries = append([]Entry(nil), ok.Entries...)
		f(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidCatalog) {
			t.Fatalf("case %d: %v", i, err)
		}
	}
}

type labelledPrompt struct {
	ID, Prompt, Label, Split string
	KeywordFree              bool `json:"keyword_free"`
}

func readPrompts(t testing.TB) []labelledPrompt {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "prompts.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []labelledPrompt
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var p labelledPrompt
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The shipped catalog parses, and its names are exactly the prompt set's style labels.
func TestDefaultCatalog(t *testing.T) {
	c, err := LoadCatalog(filepath.Join("catalogs", "default.json"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range c.Entries {
		names = append(names, e.Name)
		if e.Negative == "" || len(e.Triggers) == 0 {
			t.Fatalf("%s: no negative or triggers", e.Name)
		}
	}
	labels := map[string]bool{}
	for _, p := range readPrompts(t) {
		if p.Label != "none" {
			labels[p.Label] = true
		}
	}
	var want []string
	for l := range labels {
		want = append(want, l)
	}
	sort.Strings(names)
	sort.Strings(want)
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("catalog %v, labels %v", names, want)
	}
}
