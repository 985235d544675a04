package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// repeatReader produces prefix, then fill repeated count times, then suffix, without holding more than
// one shared block of fill: N concurrent 8 MB bodies cost the tool N readers, not N x 8 MB.
type repeatReader struct {
	prefix, suffix string
	block          []byte // fill repeated, shared read-only
	unit           int    // len(fill)
	fillLen        int64  // unit x count
	pos            int64
}

// newRepeatReader returns a reader of prefix + fill x count + suffix; block is fill repeated (see fillBlock).
func newRepeatReader(prefix string, block []byte, unit int, count int64, suffix string) *repeatReader {
	return &repeatReader{prefix: prefix, suffix: suffix, block: block, unit: unit, fillLen: int64(unit) * count}
}

// fillBlock returns fill repeated to about 64 KiB (a whole number of times).
func fillBlock(fill string) []byte {
	n := max(1, (64<<10)/len(fill))
	return []byte(strings.Repeat(fill, n))
}

func (r *repeatReader) size() int64 { return int64(len(r.prefix)) + r.fillLen + int64(len(r.suffix)) }

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		pre, fill := int64(len(r.prefix)), r.fillLen
		switch {
		case r.pos < pre:
			k := copy(p[n:], r.prefix[r.pos:])
			n += k
			r.pos += int64(k)
		case r.pos < pre+fill:
			off := r.pos - pre
			start := int(off % int64(r.unit))
			end := int64(len(r.block))
			if rest := fill - off + int64(start); rest < end {
				end = rest
			}
			k := copy(p[n:], r.block[start:end])
			n += k
			r.pos += int64(k)
		case r.pos < pre+fill+int64(len(r.suffix)):
			k := copy(p[n:], r.suffix[r.pos-pre-fill:])
			n += k
			r.pos += int64(k)
		default:
			if n == 0 {
				return 0, io.EOF
			}
			return n, nil
		}
	}
	return n, nil
}

// bigBody describes the big-bodies request: exactly size bytes of
// {"horizon":12,"series":[{"values":[1,1,...,1]}]}. It returns the parts and the number of values.
func bigBody(size int64) (prefix string, count int64, suffix string, values int64) {
	prefix, suffix = `{"horizon":12,"series":[{"values":[`, `1]}]}`
	rest := size - int64(len(prefix)) - int64(len(suffix))
	if rest%2 != 0 { // "1," is two bytes: a space takes up the odd one
		prefix = `{"horizon":12, "series":[{"values":[`
		rest--
	}
	count = max(0, rest/2)
	return prefix, count, suffix, count + 1
}

var ones = fillBlock("1,")

// newBigBody returns a lazy reader of the big-bodies request of size bytes and its number of values.
func newBigBody(size int64) (*repeatReader, int64) {
	prefix, count, suffix, values := bigBody(size)
	return newRepeatReader(prefix, ones, 2, count, suffix), values
}

// punctuation is repeated into the embedding texts: ASCII punctuation that needs no JSON escape.
const punctuation = "!#$%&'()*+,-./:;<=>?@[]^_`{|}~"

// punctText returns n bytes of punctuation.
func punctText(n int) string {
	var b strings.Builder
	b.Grow(n)
	for b.Len() < n {
		b.WriteString(punctuation[:min(len(punctuation), n-b.Len())])
	}
	return b.String()
}

// embedBody is a POST /v1/embeddings body: one text when len(texts) == 1, else an array.
func embedBody(texts []string) []byte {
	var v any = texts
	if len(texts) == 1 {
		v = texts[0]
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // "<>&" as they are: the text's bytes are the body's
	_ = enc.Encode(map[string]any{"input": v})
	return bytes.TrimSpace(b.Bytes())
}

// punctStrings returns k texts of n bytes of punctuation each.
func punctStrings(k, n int) []string {
	out := make([]string, k)
	t := punctText(n)
	for i := range out {
		out[i] = t
	}
	return out
}

// kronosBody is a Kronos request: tasks series of bars OHLCV bars (5-minute steps) each, sample_count samples;
// seed nil leaves it out.
func kronosBody(model string, tasks, bars, horizon, samples int, returnSamples bool, seed *uint64) []byte {
	type series struct {
		ID         string    `json:"id"`
		Timestamps []string  `json:"timestamps"`
		Open       []float64 `json:"open"`
		High       []float64 `json:"high"`
		Low        []float64 `json:"low"`
		Close      []float64 `json:"close"`
		Volume     []float64 `json:"volume"`
	}
	type request struct {
		Model         string   `json:"model"`
		Horizon       int      `json:"horizon"`
		SampleCount   int      `json:"sample_count"`
		Seed          *uint64  `json:"seed,omitempty"`
		ReturnSamples bool     `json:"return_samples,omitempty"`
		Series        []series `json:"series"`
	}
	r := request{Model: model, Horizon: horizon, SampleCount: samples, Seed: seed, ReturnSamples: returnSamples}
	t0 := time.Date(2024, 4, 10, 0, 0, 0, 0, time.UTC)
	for t := range tasks {
		s := series{ID: fmt.Sprintf("t%d", t)}
		for i := range bars {
			p := 100 + float64((t+i)%7)
			s.Timestamps = append(s.Timestamps, t0.Add(time.Duration(i)*5*time.Minute).Format(time.RFC3339))
			s.Open = append(s.Open, p)
			s.High = append(s.High, p+1.5)
			s.Low = append(s.Low, p-0.5)
			s.Close = append(s.Close, p+0.5)
			s.Volume = append(s.Volume, float64(1000+100*i))
		}
		r.Series = append(r.Series, s)
	}
	b, _ := json.Marshal(r)
	return b
}

// kronosCostly is the 3 KB Kronos request of the issue: 6 tasks x 4096 samples x horizon 40.
func kronosCostly(model string) []byte { return kronosBody(model, 6, 9, 40, 4096, false, nil) }

// shortForecastBody is cutenative-load's request: values (NaN as null) and horizon, the default model.
func shortForecastBody(values []float64, horizon int) ([]byte, error) {
	vals := make([]*float64, len(values))
	for i := range values {
		if !math.IsNaN(values[i]) {
			vals[i] = &values[i]
		}
	}
	type series struct {
		Values []*float64 `json:"values"`
	}
	return json.Marshal(struct {
		Horizon int      `json:"horizon"`
		Series  []series `json:"series"`
	}{horizon, []series{{vals}}})
}

// readValues reads the second column of a CSV with a header row; empty cells are missing values (NaN).
func readValues(path string) ([]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(rows) < 2 {
		return nil, fmt.Errorf("%s: no data rows", path)
	}
	var values []float64
	for i, rec := range rows[1:] {
		if len(rec) < 2 {
			return nil, fmt.Errorf("%s: line %d: want 2 columns", path, i+2)
		}
		v := math.NaN()
		if s := strings.TrimSpace(rec[1]); s != "" {
			if v, err = strconv.ParseFloat(s, 64); err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
				return nil, fmt.Errorf("%s: line %d: bad value %q", path, i+2, s)
			}
		}
		values = append(values, v)
	}
	if len(values) == 0 {
		return nil, errors.New("no values")
	}
	return values, nil
}

// syntheticSeries is a trend with a yearly (period 12) season.
func syntheticSeries(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = 100 + float64(i) + 20*math.Sin(2*math.Pi*float64(i)/12)
	}
	return v
}
