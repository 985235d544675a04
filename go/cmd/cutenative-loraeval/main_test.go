package main

import (
	"bytes"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cutenative/cutenative/go/internal/testenv"
)

func TestEvaluate(t *testing.T) {
	prompts := []Prompt{
		{Label: "a", KeywordFree: true}, {Label: "a"}, {Label: "none", KeywordFree: true}, {Label: "none"}, {Label: "b", KeywordFree: true},
	}
	tops := []Top{{"a", 0.9}, {"b", 0.5}, {"a", 0.1}, {"b", 0.6}, {"b", 0.2}}
	m := evaluate(prompts, tops, 0.3)
	// predictions: a, b, none, b, none
	want := Metrics{N: 5, Correct: 2, PredNone: 2, LabelNone: 2, BothNone: 1, KFN: 3, KFCorrect: 2, KFStyleN: 2, KFStyleRight: 1}
	if m != want {
		t.Fatalf("metrics %+v, want %+v", m, want)
	}
	if predict(Top{"", 5}, 0) != "none" || predict(Top{"a", 0.3}, 0.3) != "a" {
		t.Fatal("predict")
	}
}

// tune picks the best dev accuracy, then the middle of the widest optimal plateau, then the smaller param.
func TestTune(t *testing.T) {
	dev := []Prompt{{Label: "a"}, {Label: "none"}, {Label: "a"}, {Label: "none"}}
	byParam := map[float64][]Top{
		// param 0: the best accuracy (1.0) for thresholds in (0.5, 0.8]: 3 grid points 0.6, 0.7, 0.8
		0: {{"a", 0.9}, {"a", 0.5}, {"a", 0.8}, {"a", 0.3}},
		// param 1: 1.0 only for threshold 0.4: a narrower plateau
		1: {{"a", 0.45}, {"a", 0.35}, {"a", 0.9}, {"a", 0.1}},
	}
	grid := steps(0, 1, 0.1)
	ch := tune(dev, []Grid{{1, grid}, {0, grid}}, func(p float64) []Top { return byParam[p] })
	if ch.Param != 0 || ch.Threshold != 0.7 || ch.DevAccuracy != 1 || ch.RunLength != 3 {
		t.Fatalf("choice %+v", ch)
	}
	// Equal plateaus: the smaller param.
	byParam[1] = byParam[0]
	ch = tune(dev, []Grid{{1, grid}, {0, grid}}, func(p float64) []Top { return byParam[p] })
	if ch.Param != 0 {
		t.Fatalf("tie: %+v", ch)
	}
	if s := steps(0, 0.3, 0.1); len(s) != 4 || s[3] != 0.3 {
		t.Fatalf("steps %v", s)
	}
}

func TestStatistics(t *testing.T) {
	if p := mcnemar(0, 0); p != 1 {
		t.Fatal(p)
	}
	// b=0, c=6: two-sided p = 2 * 0.5^6.
	if p := mcnemar(0, 6); math.Abs(p-2*math.Pow(0.5, 6)) > 1e-12 {
		t.Fatal(p)
	}
	if p := mcnemar(5, 5); p != 1 {
		t.Fatal(p)
	}
	lo, hi := wilson(50, 100)
	if math.Abs(lo-0.4038) > 1e-3 || math.Abs(hi-0.5962) > 1e-3 {
		t.Fatal(lo, hi)
	}
}

// Without a model: the keyword and BM25 rows over the shipped files.
func TestRunBaselines(t *testing.T) {
	var out bytes.Buffer
	err := run(&out, "", filepath.Join("..", "..", "lora", "catalogs", "default.json"),
		filepath.Join("..", "..", "lora", "testdata", "prompts.jsonl"), "", "cpu", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Dev: 141 prompts (29 none). Test: 264 prompts", "| keyword (triggers) |", "| BM25 (k1=1.2, b=0.75) |",
		"Test top-1 by label:"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// -holdout: the holdout file replaces the test split; tuning still uses dev.
func TestRunHoldout(t *testing.T) {
	var out bytes.Buffer
	err := run(&out, "", filepath.Join("..", "..", "lora", "catalogs", "default.json"),
		filepath.Join("..", "..", "lora", "testdata", "prompts.jsonl"),
		filepath.Join("..", "..", "lora", "testdata", "prompts_holdout.jsonl"), "cpu", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Evaluation set: the holdout file", "Dev: 141 prompts (29 none). Test: 270 prompts"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}
	// A prompts file with holdout rows is refused (they belong in -holdout).
	if err := run(&out, "", filepath.Join("..", "..", "lora", "catalogs", "default.json"),
		filepath.Join("..", "..", "lora", "testdata", "prompts_holdout.jsonl"), "", "cpu", 0); err == nil {
		t.Fatal("holdout rows in -prompts accepted")
	}
}

// With the real MiniLM weights: the holdout rows of docs/lora_routing.md reproduce (embedding rows included).
func TestRunHoldoutMiniLM(t *testing.T) {
	dir := testenv.MiniLMDir(t)
	var out bytes.Buffer
	err := run(&out, dir, filepath.Join("..", "..", "lora", "catalogs", "v2.json"),
		filepath.Join("..", "..", "lora", "testdata", "prompts.jsonl"),
		filepath.Join("..", "..", "lora", "testdata", "prompts_holdout.jsonl"), "cpu", 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| embeddings, no negatives (w=0) | threshold = 0.245 | 75.9% | 68.9% (186/270) |",
		"| embeddings + negatives | w = 0.25, threshold = 0.215 | 78.7% | 67.8% (183/270) |"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// The shipped catalog (v3: example prompts, example_weight 1; w and threshold tuned on dev) reproduces its
// documented rows on test, the holdout and the second holdout (docs/lora_routing.md, "Catalog v3").
func TestRunExamplesCatalogMiniLM(t *testing.T) {
	dir := testenv.MiniLMDir(t)
	catalog := filepath.Join("..", "..", "lora", "catalogs", "default.json")
	prompts := filepath.Join("..", "..", "lora", "testdata", "prompts.jsonl")
	for _, tc := range []struct{ holdout, want string }{
		{"", "| embeddings + negatives | w = 0, threshold = 0.615 | 84.4% | 75.8% (200/264) | 66.7% (42/63) | 79.2% (42/53) | 80.7% (171/212) | 77.8% (130/167) |"},
		{filepath.Join("..", "..", "lora", "testdata", "prompts_holdout.jsonl"),
			"| embeddings + negatives | w = 0, threshold = 0.615 | 84.4% | 77.8% (210/270) | 75.0% (57/76) | 95.0% (57/60) |"},
		{filepath.Join("..", "..", "lora", "testdata", "prompts_holdout2.jsonl"),
			"| embeddings + negatives | w = 0, threshold = 0.615 | 84.4% | 87.4% (236/270) | 89.5% (51/57) | 85.0% (51/60) | 89.1% (188/211) | 88.8% (143/161) |"},
	} {
		var out bytes.Buffer
		if err := run(&out, dir, catalog, prompts, tc.holdout, "cpu", 1); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Fatalf("report lacks %q:\n%s", tc.want, out.String())
		}
	}
}

// -compare-catalog pairs the shipped catalog with v2: the documented McNemar counts and false triggers of the
// second holdout (docs/lora_routing.md, "Holdout 2 and the switch").
func TestRunCompareCatalogMiniLM(t *testing.T) {
	dir := testenv.MiniLMDir(t)
	var out bytes.Buffer
	err := runCompare(&out, dir, filepath.Join("..", "..", "lora", "catalogs", "default.json"),
		filepath.Join("..", "..", "lora", "catalogs", "v2.json"), filepath.Join("..", "..", "lora", "testdata", "prompts.jsonl"),
		filepath.Join("..", "..", "lora", "testdata", "prompts_holdout2.jsonl"), "cpu", 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| embeddings + negatives, v2.json | 35 | 8 | 0.000 |",
		"- embeddings + negatives, v2.json: 18.3% (11/60)", "- embeddings + negatives: 15.0% (9/60)"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}
}
