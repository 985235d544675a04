// Command cutenative-demo forecasts one CSV series with a running
// cutenative server and draws the result as a fan chart.
//
// It waits for the server to become ready (GET /readyz), reads a CSV file
// (header row; first column a timestamp label such as "1949-01", second
// column the value, empty for missing), asks POST /v1/forecast for the
// 0.1, 0.5 and 0.9 quantiles, prints them as a table and writes a PNG with
// the history, the median and the 10–90% band.
//
// Usage:
//
//	cutenative-demo -url http://127.0.0.1:8080 -csv examples/data/airpassengers.csv \
//	    -horizon 24 -png forecast.png [-key KEY] [-model NAME] [-wait 60s]
//
// Flags:
//
//	-url      server base URL (default http://127.0.0.1:8080)
//	-csv      input CSV file (default examples/data/airpassengers.csv)
//	-horizon  number of steps to forecast (default 24)
//	-png      output chart path (default forecast.png)
//	-key      API key, sent as "Authorization: Bearer KEY" (optional)
//	-model    model name (optional; the server's default otherwise)
//	-wait     how long to wait for the server to become ready (default 60s)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/cutenative/cutenative/go/api"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "cutenative-demo:", err)
		}
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("cutenative-demo", flag.ContinueOnError)
	url := fs.String("url", "http://127.0.0.1:8080", "server base URL")
	csvPath := fs.String("csv", "examples/data/airpassengers.csv", "input CSV (timestamp,value with a header row)")
	horizon := fs.Int("horizon", 24, "forecast horizon (steps)")
	pngPath := fs.String("png", "forecast.png", "output PNG path")
	key := fs.String("key", "", "API key (sent as a bearer token)")
	model := fs.String("model", "", "model name (default: the server's default)")
	wait := fs.Duration("wait", 60*time.Second, "how long to wait for the server to become ready")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if *horizon <= 0 {
		return fmt.Errorf("-horizon must be positive, got %d", *horizon)
	}

	labels, values, err := readCSV(*csvPath)
	if err != nil {
		return err
	}
	c := newClient(*url, *key)
	if err := c.waitReady(ctx, *wait); err != nil {
		return err
	}
	series := api.Series{ID: "value", Values: nullable(values)}
	if timestampsParse(labels) {
		series.Timestamps = labels
	}
	resp, err := c.forecast(ctx, api.ForecastRequest{
		Model:     *model,
		Horizon:   *horizon,
		Quantiles: []float64{0.1, 0.5, 0.9},
		Series:    []api.Series{series},
	})
	if err != nil {
		return err
	}
	fc, err := extractBands(resp, *horizon)
	if err != nil {
		return err
	}

	fmt.Fprintf(stdout, "model %q, horizon %d\n", resp.Model, resp.Horizon)
	writeTable(stdout, fc)
	ch := chart{
		Title:    fmt.Sprintf("%s: %d-step forecast by model %s", seriesName(*csvPath), resp.Horizon, resp.Model),
		XName:    "time step",
		YName:    "value",
		BandLow:  0.1,
		BandHigh: 0.9,
		Labels:   append(append([]string(nil), labels...), fc.Labels...),
		History:  values,
		Lower:    fc.Lower,
		Median:   fc.Median,
		Upper:    fc.Upper,
	}
	if err := writePNG(*pngPath, ch.render(chartWidth, chartHeight)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", *pngPath)
	return nil
}

// seriesName names the series in the chart's title: the CSV file's name
// without its directory and extension.
func seriesName(csvPath string) string {
	return strings.TrimSuffix(filepath.Base(csvPath), filepath.Ext(csvPath))
}

// writeTable prints one row per forecast step: label, q0.1, median, q0.9.
func writeTable(w io.Writer, fc bands) {
	width := len("timestamp")
	for _, l := range fc.Labels {
		width = max(width, len(l))
	}
	fmt.Fprintf(w, "%-*s  %8s  %8s  %8s\n", width, "timestamp", "q0.1", "median", "q0.9")
	for i, l := range fc.Labels {
		fmt.Fprintf(w, "%-*s  %8.1f  %8.1f  %8.1f\n", width, l, fc.Lower[i], fc.Median[i], fc.Upper[i])
	}
}
