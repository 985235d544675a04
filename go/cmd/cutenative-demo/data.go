package main

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// readCSV reads a CSV file whose first row is a header, first column a
// timestamp label and second column a value (empty for missing).
func readCSV(path string) (labels []string, values []float64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	labels, values, err = parseCSV(f)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return labels, values, nil
}

// parseCSV parses the CSV described at readCSV. Missing values are NaN.
func parseCSV(r io.Reader) (labels []string, values []float64, err error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true
	if _, err := cr.Read(); err != nil { // header
		if errors.Is(err, io.EOF) {
			return nil, nil, errors.New("empty CSV")
		}
		return nil, nil, err
	}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		line, _ := cr.FieldPos(0)
		if len(rec) < 2 {
			return nil, nil, fmt.Errorf("line %d: want at least 2 columns, got %d", line, len(rec))
		}
		v := math.NaN()
		if s := strings.TrimSpace(rec[1]); s != "" {
			v, err = strconv.ParseFloat(s, 64)
			if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
				return nil, nil, fmt.Errorf("line %d: bad value %q", line, s)
			}
		}
		labels = append(labels, strings.TrimSpace(rec[0]))
		values = append(values, v)
	}
	if len(values) == 0 {
		return nil, nil, errors.New("no data rows")
	}
	return labels, values, nil
}

// nullable converts NaN (missing) to nil so that it is sent as JSON null.
func nullable(values []float64) []*float64 {
	out := make([]*float64, len(values))
	for i := range values {
		if !math.IsNaN(values[i]) {
			out[i] = &values[i]
		}
	}
	return out
}

// timestampsParse reports whether every label is in a timestamp format the
// server accepts ("2006-01", "2006-01-02" or RFC 3339); only then are the
// labels sent as timestamps.
func timestampsParse(labels []string) bool {
	for _, l := range labels {
		ok := false
		for _, layout := range []string{"2006-01", "2006-01-02", time.RFC3339} {
			if _, err := time.Parse(layout, l); err == nil {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return len(labels) > 0
}
