// Command cutenative-loraeval measures LoRA routing methods on the labelled prompt set
// (go/lora/testdata/prompts.jsonl): each method's parameters are tuned on the dev split by a grid
// search, then evaluated once on the test split. It prints a Markdown report (docs/lora_routing.md).
//
//	scripts/go.sh run ./cmd/cutenative-loraeval -model DIR [-catalog FILE] [-prompts FILE] [-out FILE]
//
// Methods: keyword matching of the catalog's triggers, BM25 over the positive descriptions, the
// embedding router without negatives (w = 0) and with them (w tuned). Without -model only the first two
// run. The router is the production one (go/lora), fed with embeddings computed once per text.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cutenative/cutenative/go/cutenative"
	"github.com/cutenative/cutenative/go/lora"
)

// Prompt is one line of prompts.jsonl.
type Prompt struct {
	ID          string `json:"id"`
	Prompt      string `json:"prompt"`
	Label       string `json:"label"`
	Split       string `json:"split"`
	KeywordFree bool   `json:"keyword_free"`
}

func readPrompts(path string, names map[string]bool) ([]Prompt, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Prompt
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		var p Prompt
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if p.Label != "none" && !names[p.Label] {
			return nil, fmt.Errorf("%s:%d: label %q is not in the catalog", path, line, p.Label)
		}
		if p.Split != "dev" && p.Split != "test" && p.Split != "holdout" {
			return nil, fmt.Errorf("%s:%d: split %q", path, line, p.Split)
		}
		out = append(out, p)
	}
	return out, sc.Err()
}

// Top is a method's answer for one prompt before the threshold: its best entry and that entry's score.
type Top struct {
	Name  string
	Score float64
}

// predict applies a threshold: the entry when its score reaches it, else "none".
func predict(t Top, threshold float64) string {
	if t.Name != "" && t.Score >= threshold {
		return t.Name
	}
	return "none"
}

// Metrics of one method on a set of prompts.
type Metrics struct {
	N, Correct             int
	PredNone, LabelNone    int
	BothNone               int
	KFN, KFCorrect         int // keyword_free prompts (style and none)
	KFStyleN, KFStyleRight int // keyword_free style prompts only
}

func (m Metrics) Accuracy() float64 { return ratio(m.Correct, m.N) }

func ratio(a, b int) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

func evaluate(prompts []Prompt, tops []Top, threshold float64) Metrics {
	var m Metrics
	for i, p := range prompts {
		pred := predict(tops[i], threshold)
		ok := pred == p.Label
		m.N++
		if ok {
			m.Correct++
		}
		if pred == "none" {
			m.PredNone++
		}
		if p.Label == "none" {
			m.LabelNone++
			if pred == "none" {
				m.BothNone++
			}
		}
		if p.KeywordFree {
			m.KFN++
			if ok {
				m.KFCorrect++
			}
			if p.Label != "none" {
				m.KFStyleN++
				if ok {
					m.KFStyleRight++
				}
			}
		}
	}
	return m
}

// Grid is one tuning grid: a parameter value (w for the embedding router; 0 elsewhere) and the
// thresholds to try, in increasing order.
type Grid struct {
	Param      float64
	Thresholds []float64
}

// Choice is the outcome of tuning.
type Choice struct {
	Param, Threshold float64
	DevAccuracy      float64
	RunLength        int // consecutive grid thresholds that reach the best dev accuracy around it
}

// tune picks, over every (param, threshold) of the grids, the best dev accuracy. Ties: for each param,
// the maximal runs of consecutive thresholds reaching the best accuracy are found; the longest run wins
// (then the smaller param, then the lower run), and its middle threshold (the lower middle for an even
// length) is chosen: the most robust point of the widest optimal plateau.
func tune(dev []Prompt, grids []Grid, topsFor func(param float64) []Top) Choice {
	type run struct {
		param      float64
		lo, length int
		thresholds []float64
	}
	best := -1.0
	var runs []run
	for _, g := range grids {
		tops := topsFor(g.Param)
		accs := make([]float64, len(g.Thresholds))
		for i, th := range g.Thresholds {
			accs[i] = evaluate(dev, tops, th).Accuracy()
			if accs[i] > best+1e-12 {
				best = accs[i]
				runs = nil
			}
		}
		for i := 0; i < len(accs); {
			if math.Abs(accs[i]-best) > 1e-12 {
				i++
				continue
			}
			j := i
			for j < len(accs) && math.Abs(accs[j]-best) <= 1e-12 {
				j++
			}
			runs = append(runs, run{g.Param, i, j - i, g.Thresholds})
			i = j
		}
	}
	sort.SliceStable(runs, func(a, b int) bool {
		if runs[a].length != runs[b].length {
			return runs[a].length > runs[b].length
		}
		if runs[a].param != runs[b].param {
			return runs[a].param < runs[b].param
		}
		return runs[a].lo < runs[b].lo
	})
	r := runs[0]
	return Choice{Param: r.param, Threshold: r.thresholds[r.lo+(r.length-1)/2], DevAccuracy: best, RunLength: r.length}
}

// steps returns lo, lo+step, ..., hi (rounded to the step's decimals to avoid 0.30000000000000004).
func steps(lo, hi, step float64) []float64 {
	var out []float64
	n := int(math.Round((hi - lo) / step))
	for i := 0; i <= n; i++ {
		out = append(out, math.Round((lo+float64(i)*step)*1e6)/1e6)
	}
	return out
}

// cachedEmbedder embeds each distinct text once.
type cachedEmbedder struct {
	m     *cutenative.Model
	cache map[string][]float32
}

func (c *cachedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	var missing []string
	seen := map[string]bool{}
	for _, t := range texts {
		if _, ok := c.cache[t]; !ok && !seen[t] {
			missing = append(missing, t)
			seen[t] = true
		}
	}
	for start := 0; start < len(missing); start += 32 {
		batch := missing[start:min(start+32, len(missing))]
		vecs, err := c.m.Embed(ctx, batch)
		if err != nil {
			return nil, err
		}
		for i, v := range vecs {
			c.cache[batch[i]] = v
		}
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = c.cache[t]
	}
	return out, nil
}

// Row is one line of the result table.
type Row struct {
	Method, Params string
	Choice         Choice
	Test           Metrics
	Preds          []string // per test prompt: the predicted label ("none" for no LoRA)
}

func newRow(method, params string, ch Choice, test []Prompt, tops []Top) Row {
	r := Row{Method: method, Params: params, Choice: ch, Test: evaluate(test, tops, ch.Threshold)}
	for _, t := range tops {
		r.Preds = append(r.Preds, predict(t, ch.Threshold))
	}
	return r
}

// mcnemar is the exact two-sided McNemar test of two methods' paired outcomes: b prompts only the first
// gets right, c only the second.
func mcnemar(b, c int) float64 {
	n := b + c
	if n == 0 {
		return 1
	}
	k := min(b, c)
	var p float64
	for i := 0; i <= k; i++ {
		p += math.Exp(lgammaInt(n+1) - lgammaInt(i+1) - lgammaInt(n-i+1) - float64(n)*math.Ln2)
	}
	return math.Min(1, 2*p)
}

func lgammaInt(n int) float64 {
	v, _ := math.Lgamma(float64(n))
	return v
}

// wilson is the 95% Wilson score interval of a proportion.
func wilson(k, n int) (float64, float64) {
	if n == 0 {
		return math.NaN(), math.NaN()
	}
	const z = 1.959964
	p, nf := float64(k)/float64(n), float64(n)
	c := (p + z*z/(2*nf)) / (1 + z*z/nf)
	h := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf)) / (1 + z*z/nf)
	return c - h, c + h
}

func pct(a, b int) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f%% (%d/%d)", 100*float64(a)/float64(b), a, b)
}

func main() {
	model := flag.String("model", os.Getenv("CN_MINILM_DIR"), "sentence-embedding model directory (all-MiniLM-L6-v2); empty: only the keyword and BM25 rows")
	catalog := flag.String("catalog", filepath.Join("lora", "catalogs", "default.json"), "LoRA catalog")
	promptsPath := flag.String("prompts", filepath.Join("lora", "testdata", "prompts.jsonl"), "labelled prompts (JSON lines)")
	holdoutPath := flag.String("holdout", "", "evaluate on this set (rows with split \"holdout\", e.g. lora/testdata/prompts_holdout.jsonl) instead of the test split; tuning stays on dev")
	device := flag.String("device", "cpu", "cpu, cuda or cuda:N")
	threads := flag.Int("threads", 0, "CPU threads for the library (0: its default)")
	out := flag.String("out", "", "also write the report to this file")
	compare := flag.String("compare-catalog", "", "also tune (on dev) and evaluate the embeddings router of this catalog, listed before the main catalog's row, so that the paired McNemar table compares the two catalogs")
	flag.Parse()
	var w io.Writer = os.Stdout
	var file *os.File
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			fatal(err)
		}
		file = f
		w = io.MultiWriter(os.Stdout, f)
	}
	if err := runCompare(w, *model, *catalog, *compare, *promptsPath, *holdoutPath, *device, *threads); err != nil {
		fatal(err)
	}
	if file != nil {
		if err := file.Close(); err != nil {
			fatal(err)
		}
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "cutenative-loraeval:", err)
	os.Exit(1)
}

func run(w io.Writer, modelDir, catalogPath, promptsPath, holdoutPath, device string, threads int) error {
	return runCompare(w, modelDir, catalogPath, "", promptsPath, holdoutPath, device, threads)
}

// runCompare is run with an optional second catalog (comparePath, "" for none) whose embeddings router is tuned
// and evaluated the same way and listed just before the main catalog's, so that the paired comparison pairs them.
func runCompare(w io.Writer, modelDir, catalogPath, comparePath, promptsPath, holdoutPath, device string, threads int) error {
	ctx := context.Background()
	cat, err := lora.LoadCatalog(catalogPath)
	if err != nil {
		return err
	}
	names := map[string]bool{}
	for _, e := range cat.Entries {
		names[e.Name] = true
	}
	prompts, err := readPrompts(promptsPath, names)
	if err != nil {
		return err
	}
	var dev, test []Prompt
	for _, p := range prompts {
		switch p.Split {
		case "dev":
			dev = append(dev, p)
		case "test":
			if holdoutPath == "" {
				test = append(test, p)
			}
		default:
			return fmt.Errorf("%s: split %q belongs in a -holdout file", promptsPath, p.Split)
		}
	}
	if holdoutPath != "" {
		// The holdout set replaces the test split in every table below ("test" then means the holdout).
		held, err := readPrompts(holdoutPath, names)
		if err != nil {
			return err
		}
		for _, p := range held {
			if p.Split != "holdout" {
				return fmt.Errorf("%s: %s has split %q, not \"holdout\"", holdoutPath, p.ID, p.Split)
			}
		}
		test = held
		fmt.Fprintf(w, "Evaluation set: the holdout file %s (in the tables, \"test\" means this set).\n\n", holdoutPath)
	}
	topsOf := func(set []Prompt, f func(string) (string, float64)) []Top {
		out := make([]Top, len(set))
		for i, p := range set {
			out[i].Name, out[i].Score = f(p.Prompt)
		}
		return out
	}
	var rows []Row

	// Keyword matching: the score is the number of distinct triggers found.
	kw := lora.NewKeywordRouter(cat)
	{
		ch := tune(dev, []Grid{{0, []float64{1, 2, 3}}}, func(float64) []Top { return topsOf(dev, kw.Best) })
		rows = append(rows, newRow("keyword (triggers)", fmt.Sprintf("min. matched triggers = %g", ch.Threshold), ch,
			test, topsOf(test, kw.Best)))
	}
	// BM25 over the positive descriptions.
	bm := lora.NewBM25(cat, 1.2, 0.75)
	{
		ch := tune(dev, []Grid{{0, steps(0, 30, 0.1)}}, func(float64) []Top { return topsOf(dev, bm.Best) })
		rows = append(rows, newRow("BM25 (k1=1.2, b=0.75)", fmt.Sprintf("threshold = %g", ch.Threshold), ch,
			test, topsOf(test, bm.Best)))
	}

	var embedInfo string
	var curve []Choice
	if modelDir != "" {
		m, err := cutenative.Open(modelDir, &cutenative.Options{Device: device, Threads: threads})
		if err != nil {
			return err
		}
		defer m.Close()
		info, err := m.Info()
		if err != nil {
			return err
		}
		if info.EmbeddingDim <= 0 {
			return fmt.Errorf("%s is a %s model, not a sentence-embedding model", modelDir, info.Kind)
		}
		emb := &cachedEmbedder{m: m, cache: map[string][]float32{}}
		start := time.Now()
		var all []string // the evaluated prompts: dev and test (or the holdout)
		for _, set := range [][]Prompt{dev, test} {
			for _, p := range set {
				all = append(all, p.Prompt)
			}
		}
		if _, err := emb.Embed(ctx, all); err != nil {
			return err
		}
		embedInfo = fmt.Sprintf("%d prompts embedded in %s (%s, %s)", len(all), time.Since(start).Round(time.Millisecond), info.Device, info.DType)
		routerTopsOf := func(cat *lora.Catalog, set []Prompt, weight float64) ([]Top, error) {
			c := *cat
			c.NegativeWeight = weight
			r, err := lora.NewRouter(ctx, &c, emb)
			if err != nil {
				return nil, err
			}
			out := make([]Top, len(set))
			for i, p := range set {
				res, err := r.SearchEmbedding(emb.cache[p.Prompt], 1)
				if err != nil {
					return nil, err
				}
				out[i] = Top{res.Candidates[0].Name, res.Candidates[0].Score}
			}
			return out, nil
		}
		routerTops := func(set []Prompt, weight float64) ([]Top, error) { return routerTopsOf(cat, set, weight) }
		var tuneErr error
		devTops := func(weight float64) []Top {
			t, err := routerTops(dev, weight)
			if err != nil && tuneErr == nil {
				tuneErr = err
			}
			return t
		}
		thresholds := steps(-0.2, 1, 0.005)
		ch0 := tune(dev, []Grid{{0, thresholds}}, devTops)
		var grids []Grid
		for _, wt := range steps(0, 2, 0.05) {
			grids = append(grids, Grid{wt, thresholds})
		}
		chW := tune(dev, grids, devTops)
		if tuneErr != nil {
			return tuneErr
		}
		t0, err := routerTops(test, 0)
		if err != nil {
			return err
		}
		tW, err := routerTops(test, chW.Param)
		if err != nil {
			return err
		}
		rows = append(rows, newRow("embeddings, no negatives (w=0)", fmt.Sprintf("threshold = %g", ch0.Threshold), ch0, test, t0))
		if comparePath != "" {
			oc, err := lora.LoadCatalog(comparePath)
			if err != nil {
				return err
			}
			ocTops := func(weight float64) []Top {
				t, err := routerTopsOf(oc, dev, weight)
				if err != nil && tuneErr == nil {
					tuneErr = err
				}
				return t
			}
			chO := tune(dev, grids, ocTops)
			if tuneErr != nil {
				return tuneErr
			}
			tO, err := routerTopsOf(oc, test, chO.Param)
			if err != nil {
				return err
			}
			rows = append(rows, newRow("embeddings + negatives, "+filepath.Base(comparePath),
				fmt.Sprintf("w = %g, threshold = %g", chO.Param, chO.Threshold), chO, test, tO))
		}
		rows = append(rows, newRow("embeddings + negatives", fmt.Sprintf("w = %g, threshold = %g", chW.Param, chW.Threshold), chW, test, tW))
		// The dev curve over w (each w with its own best threshold): dev data only.
		for _, g := range grids {
			if int(math.Round(g.Param*100))%10 != 0 {
				continue
			}
			ch := tune(dev, []Grid{g}, devTops)
			curve = append(curve, ch)
		}
		if tuneErr != nil {
			return tuneErr
		}
	}
	if err := report(w, rows, dev, test, embedInfo); err != nil {
		return err
	}
	reportDetails(w, rows, test, curve)
	return nil
}

// reportDetails prints the paired comparisons, per-label results and the dev curve over w.
func reportDetails(w io.Writer, rows []Row, test []Prompt, curve []Choice) {
	last := rows[len(rows)-1]
	fmt.Fprintf(w, "\nPaired comparison on test with \"%s\" (exact McNemar test; b: prompts only it gets right, c: only the other):\n\n", last.Method)
	fmt.Fprintln(w, "| other method | b | c | p-value |")
	fmt.Fprintln(w, "|---|---:|---:|---:|")
	for _, r := range rows[:len(rows)-1] {
		b, c := 0, 0
		for i, p := range test {
			x, y := last.Preds[i] == p.Label, r.Preds[i] == p.Label
			if x && !y {
				b++
			}
			if y && !x {
				c++
			}
		}
		fmt.Fprintf(w, "| %s | %d | %d | %.3f |\n", r.Method, b, c, mcnemar(b, c))
	}
	fmt.Fprintln(w, "\nFalse triggers on test (prompts labelled none that get a LoRA):")
	fmt.Fprintln(w)
	for _, r := range rows {
		n, fired := 0, 0
		for i, p := range test {
			if p.Label == "none" {
				n++
				if r.Preds[i] != "none" {
					fired++
				}
			}
		}
		fmt.Fprintf(w, "- %s: %s\n", r.Method, pct(fired, n))
	}
	fmt.Fprintln(w, "\nWidth of the tuned optimum on dev (consecutive grid thresholds reaching the best dev top-1 at the chosen parameter):")
	fmt.Fprintln(w)
	for _, r := range rows {
		fmt.Fprintf(w, "- %s: %d\n", r.Method, r.Choice.RunLength)
	}
	fmt.Fprintln(w, "\n95% Wilson intervals of test top-1:")
	fmt.Fprintln(w)
	for _, r := range rows {
		lo, hi := wilson(r.Test.Correct, r.Test.N)
		fmt.Fprintf(w, "- %s: %.1f%% [%.1f%%, %.1f%%]\n", r.Method, 100*r.Test.Accuracy(), 100*lo, 100*hi)
	}
	// Per label.
	labels := []string{}
	seen := map[string]bool{}
	for _, p := range test {
		if !seen[p.Label] {
			seen[p.Label] = true
			labels = append(labels, p.Label)
		}
	}
	sort.Strings(labels)
	fmt.Fprintln(w, "\nTest top-1 by label:")
	fmt.Fprintln(w)
	fmt.Fprint(w, "| label | n |")
	for _, r := range rows {
		fmt.Fprintf(w, " %s |", r.Method)
	}
	fmt.Fprint(w, "\n|---|---:|")
	for range rows {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w)
	for _, l := range labels {
		n := 0
		for _, p := range test {
			if p.Label == l {
				n++
			}
		}
		fmt.Fprintf(w, "| %s | %d |", l, n)
		for _, r := range rows {
			k := 0
			for i, p := range test {
				if p.Label == l && r.Preds[i] == l {
					k++
				}
			}
			fmt.Fprintf(w, " %d |", k)
		}
		fmt.Fprintln(w)
	}
	if len(curve) > 0 {
		fmt.Fprintln(w, "\nDev top-1 by negative weight w (each w with its own best threshold; dev data only):")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| w | threshold | dev top-1 | plateau (grid steps) |")
		fmt.Fprintln(w, "|---:|---:|---:|---:|")
		for _, c := range curve {
			fmt.Fprintf(w, "| %g | %g | %.1f%% | %d |\n", c.Param, c.Threshold, 100*c.DevAccuracy, c.RunLength)
		}
	}
}

func report(w io.Writer, rows []Row, dev, test []Prompt, embedInfo string) error {
	var devNone, testNone, testKF, testKFStyle int
	for _, p := range dev {
		if p.Label == "none" {
			devNone++
		}
	}
	for _, p := range test {
		if p.Label == "none" {
			testNone++
		}
		if p.KeywordFree {
			testKF++
			if p.Label != "none" {
				testKFStyle++
			}
		}
	}
	fmt.Fprintf(w, "Dev: %d prompts (%d none). Test: %d prompts (%d none; %d keyword-free, of which %d style prompts).\n",
		len(dev), devNone, len(test), testNone, testKF, testKFStyle)
	if embedInfo != "" {
		fmt.Fprintln(w, embedInfo+".")
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| method | params tuned on dev | dev top-1 | test top-1 | no-LoRA precision | no-LoRA recall | keyword-free top-1 | keyword-free style top-1 |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|")
	bestAcc, bestMethod := -1.0, ""
	for _, r := range rows {
		t := r.Test
		fmt.Fprintf(w, "| %s | %s | %.1f%% | %s | %s | %s | %s | %s |\n", r.Method, r.Params, 100*r.Choice.DevAccuracy,
			pct(t.Correct, t.N), pct(t.BothNone, t.PredNone), pct(t.BothNone, t.LabelNone), pct(t.KFCorrect, t.KFN),
			pct(t.KFStyleRight, t.KFStyleN))
		if a := t.Accuracy(); a > bestAcc {
			bestAcc, bestMethod = a, r.Method
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Best test top-1: %s.\n", bestMethod)
	if len(rows) == 0 {
		return errors.New("no methods ran")
	}
	return nil
}
