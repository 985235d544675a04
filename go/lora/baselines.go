package lora

import (
	"math"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The two non-embedding baselines the evaluation (cmd/cutenative-loraeval, docs/lora_routing.md)
// compares the router with. Both answer the best entry and its score; a caller selects it when the
// score reaches its threshold.

// KeywordRouter matches each entry's literal triggers in the prompt: case-insensitive, at word
// boundaries (the characters around a match are not letters or digits, so "pixel" does not match
// "pixelated" and "3d" matches "3d-printed"). An entry's score is the number of its distinct triggers
// found; ties go to the entry whose first match comes earliest in the prompt, then to the name.
type KeywordRouter struct {
	names    []string
	triggers [][]string // lower-cased
}

// NewKeywordRouter takes the catalog's triggers.
func NewKeywordRouter(cat *Catalog) *KeywordRouter {
	k := &KeywordRouter{}
	for _, e := range cat.Entries {
		k.names = append(k.names, e.Name)
		var ts []string
		for _, t := range e.Triggers {
			ts = append(ts, strings.ToLower(strings.TrimSpace(t)))
		}
		k.triggers = append(k.triggers, ts)
	}
	return k
}

// Best returns the best entry and its number of matched triggers ("", 0 when nothing matches).
func (k *KeywordRouter) Best(prompt string) (string, float64) {
	p := strings.ToLower(prompt)
	best, bestCount, bestPos := -1, 0, 0
	for i, ts := range k.triggers {
		count, first := 0, len(p)
		for _, t := range ts {
			if pos := findWord(p, t); pos >= 0 {
				count++
				first = min(first, pos)
			}
		}
		if count == 0 {
			continue
		}
		if best < 0 || count > bestCount || (count == bestCount && (first < bestPos ||
			(first == bestPos && k.names[i] < k.names[best]))) {
			best, bestCount, bestPos = i, count, first
		}
	}
	if best < 0 {
		return "", 0
	}
	return k.names[best], float64(bestCount)
}

// findWord returns the byte offset of the first occurrence of w in s that starts and ends at a word
// boundary, or -1.
func findWord(s, w string) int {
	if w == "" {
		return -1
	}
	for off := 0; off <= len(s)-len(w); {
		i := strings.Index(s[off:], w)
		if i < 0 {
			return -1
		}
		start, end := off+i, off+i+len(w)
		before, _ := utf8.DecodeLastRuneInString(s[:start])
		after, _ := utf8.DecodeRuneInString(s[end:])
		if (start == 0 || !isWordRune(before)) && (end == len(s) || !isWordRune(after)) {
			return start
		}
		_, size := utf8.DecodeRuneInString(s[start:])
		off = start + size
	}
	return -1
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// BM25 ranks the entries' positive descriptions (one document each) for a prompt (the query):
//
//	score(d) = sum over distinct query terms t of idf(t) * tf(t,d)*(k1+1) / (tf(t,d) + k1*(1-b+b*|d|/avgdl))
//	idf(t)   = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
//
// with the tokenisation of Tokenize; ties go to the name.
type BM25 struct {
	K1, B float64
	names []string
	tf    []map[string]int
	dl    []float64
	avgdl float64
	idf   map[string]float64
}

// NewBM25 indexes the positive descriptions (the usual parameters are k1 = 1.2, b = 0.75).
func NewBM25(cat *Catalog, k1, b float64) *BM25 {
	m := &BM25{K1: k1, B: b, idf: map[string]float64{}}
	df := map[string]int{}
	for _, e := range cat.Entries {
		tf := map[string]int{}
		toks := Tokenize(e.Positive)
		for _, t := range toks {
			tf[t]++
		}
		for t := range tf {
			df[t]++
		}
		m.names = append(m.names, e.Name)
		m.tf = append(m.tf, tf)
		m.dl = append(m.dl, float64(len(toks)))
		m.avgdl += float64(len(toks))
	}
	n := float64(len(cat.Entries))
	m.avgdl /= n
	for t, d := range df {
		m.idf[t] = math.Log(1 + (n-float64(d)+0.5)/(float64(d)+0.5))
	}
	return m
}

// Scores returns every entry's score, in catalog order.
func (m *BM25) Scores(prompt string) []float64 {
	seen := map[string]bool{}
	out := make([]float64, len(m.names))
	for _, t := range Tokenize(prompt) {
		if seen[t] {
			continue
		}
		seen[t] = true
		idf, ok := m.idf[t]
		if !ok {
			continue
		}
		for i, tf := range m.tf {
			f := float64(tf[t])
			if f == 0 {
				continue
			}
			out[i] += idf * f * (m.K1 + 1) / (f + m.K1*(1-m.B+m.B*m.dl[i]/m.avgdl))
		}
	}
	return out
}

// Best returns the best entry and its score.
func (m *BM25) Best(prompt string) (string, float64) {
	s := m.Scores(prompt)
	idx := make([]int, len(s))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool {
		if s[idx[a]] != s[idx[b]] {
			return s[idx[a]] > s[idx[b]]
		}
		return m.names[idx[a]] < m.names[idx[b]]
	})
	return m.names[idx[0]], s[idx[0]]
}

// stopWords are dropped by Tokenize: English function words, nothing domain-specific.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an the and or but nor of in on at to for with by from as into onto
		over under about than then so such is are was were be been being am it its it's this that these
		those there here i me my we our you your he she him her his they them their what which who whom
		whose how when where why do does did doing have has had can could would should will shall may
		might must not no yes very too also just only all any some each every both either neither
		s t up out off if`) {
		m[w] = true
	}
	return m
}()

// Tokenize lower-cases s and splits it into maximal runs of letters and digits (Unicode), dropping
// one-character tokens and stop words; no stemming.
func Tokenize(s string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !isWordRune(r) }) {
		if utf8.RuneCountInString(f) < 2 || stopWords[f] {
			continue
		}
		out = append(out, f)
	}
	return out
}
