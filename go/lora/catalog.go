package lora

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cutenative/cutenative/go/internal/jsonstrict"
)

// Defaults of a catalog file's optional fields. The weight and threshold were tuned on the dev split of the
// labelled prompt set (testdata/prompts.jsonl) with all-MiniLM-L6-v2 and catalog v2 (catalogs/v2.json, no example
// prompts); the shipped catalog with examples sets its own (docs/lora_routing.md).
const (
	DefaultNegativeWeight = 0.25
	DefaultThreshold      = 0.215
	// DefaultExampleWeight is lambda in an entry's score with example prompts (Catalog.ExampleWeight), chosen on
	// the dev split (docs/lora_routing.md).
	DefaultExampleWeight = 1.0
)

// Limits bound what a catalog file may hold (hostile or runaway files fail cleanly).
type Limits struct {
	MaxFileBytes    int64 // the whole file
	MaxEntries      int
	MaxNameBytes    int
	MaxPathBytes    int
	MaxTextBytes    int // each positive / negative description
	MaxTriggers     int // per entry
	MaxTriggerBytes int
	MaxExamples     int // example prompts per entry (each at most MaxTextBytes)
	MaxDepth        int // JSON nesting
}

// DefaultLimits are the limits ParseCatalog and LoadCatalog apply.
var DefaultLimits = Limits{
	MaxFileBytes:    64 << 20,
	MaxEntries:      100_000,
	MaxNameBytes:    128,
	MaxPathBytes:    4096,
	MaxTextBytes:    16 << 10,
	MaxTriggers:     64,
	MaxTriggerBytes: 128,
	MaxExamples:     64,
	MaxDepth:        8,
}

// Entry is one LoRA adapter of a catalog.
type Entry struct {
	Name     string   // unique, non-empty; what the router answers with
	Path     string   // the adapter file, as written in the catalog (never exposed by the server)
	Scale    float64  // the strength to apply it with
	Positive string   // what the style is for (embedded once at load)
	Negative string   // what it must not be used for; "" means no negative
	Triggers []string // literal keywords (used by the keyword baseline, not by the router)
	// Examples are prompts the style suits (optional; embedded once at load): the router scores an entry by the
	// best of its positive description and its examples, minus the weighted negative.
	Examples []string
}

// Catalog is a validated catalog file.
type Catalog struct {
	NegativeWeight float64 // w in score = cos(q, positive) - w*cos(q, negative); >= 0
	// ExampleWeight is lambda in the score of a catalog with example prompts: cos(q, positive) + lambda *
	// max_k cos(q, example_k) - w*cos(q, negative) (an entry without examples counts its positive as its example);
	// >= 0, unused when no entry has examples.
	ExampleWeight float64
	Threshold     float64 // the top score must reach it for a LoRA to be selected
	Entries       []Entry
}

// wire types: pointers tell "absent" from zero; unknown fields are rejected by the decoder.
type wireCatalog struct {
	NegativeWeight *float64    `json:"negative_weight"`
	ExampleWeight  *float64    `json:"example_weight"`
	Threshold      *float64    `json:"threshold"`
	LoRAs          []wireEntry `json:"loras"`
}

type wireEntry struct {
	Name     *string  `json:"name"`
	Path     *string  `json:"path"`
	Scale    *float64 `json:"scale"`
	Positive *string  `json:"positive"`
	Negative *string  `json:"negative"`
	Triggers []string `json:"triggers"`
	Examples []string `json:"examples"`
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidCatalog, fmt.Sprintf(format, args...))
}

// LoadCatalog reads and validates a catalog file.
func LoadCatalog(path string) (*Catalog, error) {
	return loadCatalog(path, DefaultLimits)
}

func loadCatalog(path string, lim Limits) (*Catalog, error) {
	data, err := readCatalogFile(path, lim)
	if err != nil {
		return nil, err
	}
	c, err := parseCatalog(data, lim)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// readCatalogFile reads at most lim.MaxFileBytes of path; a larger file is ErrInvalidCatalog.
func readCatalogFile(path string, lim Limits) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("lora: catalog: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, lim.MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("lora: catalog %s: %w", path, err)
	}
	if int64(len(data)) > lim.MaxFileBytes {
		return nil, fmt.Errorf("%w: %s: larger than %d bytes", ErrInvalidCatalog, path, lim.MaxFileBytes)
	}
	return data, nil
}

// ParseCatalog decodes and validates a catalog document:
//
//	{"negative_weight": w, "example_weight": lambda, "threshold": t,
//	 "loras": [{"name", "path", "scale", "positive", "negative", "triggers": [...], "examples": [...]}, ...]}
//
// negative_weight (default DefaultNegativeWeight), example_weight (DefaultExampleWeight) and threshold
// (default DefaultThreshold) are optional,
// as are negative, triggers and examples; name, path, scale and positive are required. Unknown fields, duplicate
// keys, trailing data, duplicate or empty names, non-finite numbers, a negative weight below 0, empty
// positives, NUL characters and anything beyond DefaultLimits are rejected with ErrInvalidCatalog.
func ParseCatalog(data []byte) (*Catalog, error) {
	return parseCatalog(data, DefaultLimits)
}

func parseCatalog(data []byte, lim Limits) (*Catalog, error) {
	if int64(len(data)) > lim.MaxFileBytes {
		return nil, invalid("larger than %d bytes", lim.MaxFileBytes)
	}
	if !utf8.Valid(data) {
		return nil, invalid("not valid UTF-8")
	}
	if err := checkStructure(data, lim.MaxDepth); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var w wireCatalog
	if err := dec.Decode(&w); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if te.Field == "" {
				return nil, invalid("the document must be a JSON object, got JSON %s", te.Value)
			}
			return nil, invalid("field %q: expected %s, got JSON %s", te.Field, te.Type, te.Value)
		}
		return nil, invalid("%v", err)
	}
	c := &Catalog{NegativeWeight: DefaultNegativeWeight, ExampleWeight: DefaultExampleWeight, Threshold: DefaultThreshold}
	if w.NegativeWeight != nil {
		c.NegativeWeight = *w.NegativeWeight
	}
	if w.ExampleWeight != nil {
		c.ExampleWeight = *w.ExampleWeight
	}
	if w.Threshold != nil {
		c.Threshold = *w.Threshold
	}
	if len(w.LoRAs) > lim.MaxEntries { // before copying anything
		return nil, invalid("loras: %d entries exceed the limit of %d", len(w.LoRAs), lim.MaxEntries)
	}
	c.Entries = make([]Entry, len(w.LoRAs))
	for i, we := range w.LoRAs {
		for _, f := range []struct {
			name string
			ok   bool
		}{{"name", we.Name != nil}, {"path", we.Path != nil}, {"scale", we.Scale != nil}, {"positive", we.Positive != nil}} {
			if !f.ok {
				return nil, invalid("loras[%d].%s: required", i, f.name)
			}
		}
		e := Entry{Name: *we.Name, Path: *we.Path, Scale: *we.Scale, Positive: *we.Positive, Triggers: we.Triggers, Examples: we.Examples}
		if we.Negative != nil {
			e.Negative = *we.Negative
		}
		c.Entries[i] = e
	}
	if err := c.validate(lim); err != nil {
		return nil, err
	}
	for i := range c.Entries {
		if strings.TrimSpace(c.Entries[i].Negative) == "" {
			c.Entries[i].Negative = ""
		}
	}
	return c, nil
}

// Validate checks a catalog built in code against the rules ParseCatalog applies (with DefaultLimits).
func (c *Catalog) Validate() error { return c.validate(DefaultLimits) }

func (c *Catalog) validate(lim Limits) error {
	if !finite(c.NegativeWeight) || c.NegativeWeight < 0 {
		return invalid("negative_weight: must be a finite number >= 0, got %v", c.NegativeWeight)
	}
	if !finite(c.ExampleWeight) || c.ExampleWeight < 0 {
		return invalid("example_weight: must be a finite number >= 0, got %v", c.ExampleWeight)
	}
	if !finite(c.Threshold) {
		return invalid("threshold: must be finite")
	}
	if len(c.Entries) == 0 {
		return invalid("loras: at least one entry is required")
	}
	if len(c.Entries) > lim.MaxEntries {
		return invalid("loras: %d entries exceed the limit of %d", len(c.Entries), lim.MaxEntries)
	}
	seen := make(map[string]int, len(c.Entries))
	for i, e := range c.Entries {
		at := fmt.Sprintf("loras[%d]", i)
		if e.Name == "" {
			return invalid("%s.name: required and non-empty", at)
		}
		at = fmt.Sprintf("loras[%d] (%q)", i, e.Name)
		if err := checkName(e.Name, lim.MaxNameBytes); err != nil {
			return invalid("%s.name: %s", at, err)
		}
		if j, dup := seen[e.Name]; dup {
			return invalid("%s.name: duplicate of loras[%d]", at, j)
		}
		seen[e.Name] = i
		if strings.TrimSpace(e.Path) == "" {
			return invalid("%s.path: required and non-empty", at)
		}
		if err := checkText(e.Path, lim.MaxPathBytes); err != nil {
			return invalid("%s.path: %s", at, err)
		}
		if !finite(e.Scale) {
			return invalid("%s.scale: must be finite", at)
		}
		if strings.TrimSpace(e.Positive) == "" {
			return invalid("%s.positive: required and non-empty", at)
		}
		if err := checkText(e.Positive, lim.MaxTextBytes); err != nil {
			return invalid("%s.positive: %s", at, err)
		}
		if err := checkText(e.Negative, lim.MaxTextBytes); err != nil {
			return invalid("%s.negative: %s", at, err)
		}
		if len(e.Triggers) > lim.MaxTriggers {
			return invalid("%s.triggers: %d exceed the limit of %d", at, len(e.Triggers), lim.MaxTriggers)
		}
		for k, t := range e.Triggers {
			if strings.TrimSpace(t) == "" {
				return invalid("%s.triggers[%d]: empty", at, k)
			}
			if err := checkText(t, lim.MaxTriggerBytes); err != nil {
				return invalid("%s.triggers[%d]: %s", at, k, err)
			}
		}
		if len(e.Examples) > lim.MaxExamples {
			return invalid("%s.examples: %d exceed the limit of %d", at, len(e.Examples), lim.MaxExamples)
		}
		for k, x := range e.Examples {
			if strings.TrimSpace(x) == "" {
				return invalid("%s.examples[%d]: empty", at, k)
			}
			if err := checkText(x, lim.MaxTextBytes); err != nil {
				return invalid("%s.examples[%d]: %s", at, k, err)
			}
		}
	}
	return nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

func checkText(s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("%d bytes exceed the limit of %d", len(s), max)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return errors.New("contains a NUL character")
	}
	if !utf8.ValidString(s) {
		return errors.New("not valid UTF-8")
	}
	return nil
}

func checkName(s string, max int) error {
	if err := checkText(s, max); err != nil {
		return err
	}
	if strings.TrimSpace(s) != s {
		return errors.New("leading or trailing white space")
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return errors.New("contains a control character")
		}
	}
	return nil
}

// checkStructure rejects duplicate object keys, nesting deeper than maxDepth and trailing data
// (internal/jsonstrict).
func checkStructure(data []byte, maxDepth int) error {
	if err := jsonstrict.Check(data, maxDepth, "catalog object"); err != nil {
		return invalid("%v", err)
	}
	return nil
}
