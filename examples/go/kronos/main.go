// Kronos in process from Go: forecast OHLCV bars with a seed and print the mean close and its sample range.
//
//	go run ./kronos <kronos_model_dir> [horizon]     (scripts/go.sh sets the cgo flags; see README)
//
// The bars are synthetic (5-minute candles around a slow sine); a Kronos task is a group of series in the
// order open, high, low, close[, volume[, amount]] with the timestamps on its first series.
package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"

	"github.com/cutenative/cutenative/go/cutenative"
)

func main() {
	if len(os.Args) < 2 || len(os.Args) > 3 {
		fmt.Fprintln(os.Stderr, "usage: kronos <kronos_model_dir> [horizon]")
		os.Exit(2)
	}
	horizon := 6
	if len(os.Args) == 3 {
		var err error
		if horizon, err = strconv.Atoi(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "horizon:", err)
			os.Exit(2)
		}
	}
	const bars, step, start = 32, 300, 1712700000 // 5-minute bars from 2024-04-09 22:00 UTC
	ohlcv := make([][]float32, 5)
	history := make([]int64, bars)
	for i := 0; i < bars; i++ {
		mid := 100 + 2*math.Sin(float64(i)/5)
		for c, v := range []float64{mid - 0.2, mid + 0.5, mid - 0.6, mid + 0.1, 1000 + 50*math.Cos(float64(i))} {
			ohlcv[c] = append(ohlcv[c], float32(v))
		}
		history[i] = start + step*int64(i)
	}
	future := make([]int64, horizon)
	for h := range future {
		future[h] = start + step*int64(bars+h)
	}
	req := &cutenative.ForecastRequest{Horizon: horizon, Seed: 42, ReturnSamples: true,
		Sampling: &cutenative.Sampling{Temperature: 1, TopP: 0.9, SampleCount: 8}}
	for c, v := range ohlcv {
		s := cutenative.Series{Values: v, Group: 1} // one task: the five channels share a group
		if c == 0 {
			s.Timestamps, s.FutureTimestamps = history, future
		}
		req.Series = append(req.Series, s)
	}
	m, err := cutenative.Open(os.Args[1], nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer m.Close()
	f, err := m.Forecast(context.Background(), req)
	if err != nil {
		fmt.Fprintln(os.Stderr, err) // errors.Is(err, cutenative.ErrInvalidArgument): the message names the field
		os.Exit(1)
	}
	const closeSeries = 3
	fmt.Println("step close_mean close_min close_max")
	for h := 0; h < f.Horizon; h++ {
		lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
		for k := 0; k < f.NSamples; k++ {
			v := f.SamplePath(closeSeries, k, 0)[h]
			lo, hi = min(lo, v), max(hi, v)
		}
		fmt.Printf("%d %.4f %.4f %.4f\n", h+1, f.Row(closeSeries, 0)[h], lo, hi)
	}
}
