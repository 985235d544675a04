package server

import (
	"fmt"
	"strconv"
	"time"
)

var timeLayouts = []string{"2006-01", "2006-01-02", time.RFC3339Nano}

// parseTimestamps parses non-empty stamps in the format of the first (one of timeLayouts) and hands each, in
// order, to each, whose error stops the parse; at names the stamps in errors ("timestamps",
// "series[0].future_timestamps"). It returns the format.
func parseTimestamps(stamps []string, at string, each func(i int, t time.Time) error) (string, error) {
	var layout string
	for _, l := range timeLayouts {
		if _, err := time.Parse(l, stamps[0]); err == nil {
			layout = l
			break
		}
	}
	if layout == "" {
		return "", badRequest(at + "[0]: want YYYY-MM, YYYY-MM-DD or RFC 3339, got " + strconv.Quote(stamps[0]))
	}
	for i, s := range stamps {
		t, err := time.Parse(layout, s)
		if err != nil {
			return "", badRequest(fmt.Sprintf("%s[%d]: not in the format of %s[0]: %q", at, i, at, s))
		}
		if err := each(i, t); err != nil {
			return "", err
		}
	}
	return layout, nil
}

// futureTimestamps continues a regular series of timestamps by `horizon` steps in the input's format:
// by calendar months when consecutive stamps are whole months apart (same day of month), by a fixed
// duration otherwise. Irregular or unparsable stamps give nil (no timestamps in the response) or an error.
func futureTimestamps(stamps []string, horizon int) ([]string, error) {
	if len(stamps) == 0 {
		return nil, nil
	}
	ts := make([]time.Time, len(stamps))
	layout, err := parseTimestamps(stamps, "timestamps", func(i int, t time.Time) error {
		if i > 0 && !t.After(ts[i-1]) {
			return badRequest(fmt.Sprintf("timestamps[%d]: not after timestamps[%d]", i, i-1))
		}
		ts[i] = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(ts) < 2 {
		return nil, nil
	}
	months := func(a, b time.Time) (int, bool) {
		m := (b.Year()-a.Year())*12 + int(b.Month()-a.Month())
		return m, b.Day() == a.Day() && b.Sub(a.AddDate(0, m, 0)) == 0
	}
	step, monthly := months(ts[0], ts[1])
	for i := 2; i < len(ts) && monthly; i++ {
		m, ok := months(ts[i-1], ts[i])
		monthly = ok && m == step
	}
	last := ts[len(ts)-1]
	if monthly && step > 0 {
		// Years past 9999 cannot be written in these formats; AddDate takes the month count whole.
		if end := last.AddDate(0, step*horizon, 0); end.Year() > 9999 {
			return nil, badRequest(fmt.Sprintf("timestamps: the forecast's last step would fall in the year %d (after 9999)", end.Year()))
		}
		out := make([]string, horizon)
		for h := range out {
			out[h] = last.AddDate(0, step*(h+1), 0).Format(layout)
		}
		return out, nil
	}
	d := ts[1].Sub(ts[0]) // saturates at about 292 years: each step must round-trip
	for i := 1; i < len(ts); i++ {
		if ts[i].Sub(ts[i-1]) != d || !ts[i-1].Add(d).Equal(ts[i]) {
			return nil, nil // irregular (or steps too long for a duration): no future stamps
		}
	}
	// d * horizon can overflow time.Duration (about 292 years): check the end in days first, then step.
	if days := float64(d) / float64(24*time.Hour) * float64(horizon); float64(last.Year())+days/365.2425 > 9999 {
		return nil, badRequest(fmt.Sprintf("timestamps: %d steps of %s after %s run past the year 9999", horizon, d, stamps[len(stamps)-1]))
	}
	out := make([]string, horizon)
	t := last
	for h := range out {
		t = t.Add(d)
		out[h] = t.Format(layout)
	}
	return out, nil
}
