// Forecast in process from Go: open a model directory, forecast a CSV column, print the quantiles.
//
//	go run . <model_dir> <csv> <horizon>        (scripts/go.sh sets the cgo flags; see README)
//
// The CSV has a header; its last column holds the values (empty = missing).
package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/cutenative/cutenative/go/cutenative"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: forecast <model_dir> <csv> <horizon>")
		os.Exit(2)
	}
	horizon, err := strconv.Atoi(os.Args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, "horizon:", err)
		os.Exit(2)
	}
	values, err := readColumn(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	m, err := cutenative.Open(os.Args[1], nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err) // errors.Is(err, cutenative.ErrNotFound) etc. tell the cause
		os.Exit(1)
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f, err := m.Forecast(ctx, &cutenative.ForecastRequest{
		Series:    []cutenative.Series{{Values: values}},
		Horizon:   horizon,
		Quantiles: []float32{0.1, 0.5, 0.9},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("step q0.1 q0.5 q0.9")
	for h := 0; h < f.Horizon; h++ {
		fmt.Printf("%d %.6g %.6g %.6g\n", h+1, f.At(0, 0, h), f.At(0, 1, h), f.At(0, 2, h))
	}
}

func readColumn(path string) ([]float32, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	rows, err := csv.NewReader(file).ReadAll()
	if err != nil {
		return nil, err
	}
	var out []float32
	for i, r := range rows {
		if i == 0 || len(r) == 0 {
			continue
		}
		cell := r[len(r)-1]
		if cell == "" {
			out = append(out, float32(math.NaN()))
			continue
		}
		v, err := strconv.ParseFloat(cell, 32)
		if err != nil {
			return nil, fmt.Errorf("%s row %d: %w", path, i+1, err)
		}
		out = append(out, float32(v))
	}
	return out, nil
}
