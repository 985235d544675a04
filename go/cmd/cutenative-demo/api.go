package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cutenative/cutenative/go/api"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

type client struct {
	base string
	key  string
	http *http.Client
}

func newClient(base, key string) *client {
	return &client{
		base: strings.TrimRight(base, "/"),
		key:  key,
		http: &http.Client{Timeout: 5 * time.Minute},
	}
}

// waitReady polls GET /readyz until it answers 200 or wait has passed; with
// wait <= 0 it tries once.
func (c *client) waitReady(ctx context.Context, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		err := c.ready(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("server at %s not ready after %v: %w", c.base, wait, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(500*time.Millisecond, time.Until(deadline))):
		}
	}
}

func (c *client) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/readyz", nil)
	if err != nil {
		return err
	}
	c.authorize(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return responseError(resp)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

// forecast posts req to /v1/forecast and decodes the answer.
func (c *client) forecast(ctx context.Context, fr api.ForecastRequest) (*api.ForecastResponse, error) {
	body, err := json.Marshal(fr)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/forecast", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	c.authorize(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("forecast: %w", responseError(resp))
	}
	var out api.ForecastResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("forecast: decoding response: %w", err)
	}
	return &out, nil
}

func (c *client) authorize(req *http.Request) {
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
}

// responseError describes a non-200 response, using the server's error
// JSON message when there is one.
func responseError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	msg := resp.Status
	var e api.ErrorResponse
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		msg += ": " + e.Error.Message
		if e.Error.Code != "" {
			msg += " (" + e.Error.Code + ")"
		}
	} else if s := strings.TrimSpace(string(b)); s != "" {
		if len(s) > 200 {
			s = s[:200] + "..."
		}
		msg += ": " + s
	}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		msg += " (Retry-After: " + ra + ")"
	}
	return errors.New(msg)
}

// bands is the forecast of one series at the levels 0.1, 0.5 and 0.9.
type bands struct {
	Labels               []string
	Lower, Median, Upper []float64
}

// extractBands checks resp and picks the 0.1, 0.5 and 0.9 levels of its
// single forecast. Steps are labelled by the returned timestamps, or
// "t+1", "t+2", ... without them.
func extractBands(resp *api.ForecastResponse, horizon int) (bands, error) {
	if len(resp.Forecasts) != 1 {
		return bands{}, fmt.Errorf("forecast: want 1 series in the response, got %d", len(resp.Forecasts))
	}
	f := resp.Forecasts[0]
	if len(f.Quantiles) != len(resp.Quantiles) {
		return bands{}, fmt.Errorf("forecast: %d quantile rows for %d levels", len(f.Quantiles), len(resp.Quantiles))
	}
	level := func(q float64) ([]float64, error) {
		for i, l := range resp.Quantiles {
			if math.Abs(float64(l)-q) < 1e-6 { // levels travel as float32
				if len(f.Quantiles[i]) != horizon {
					return nil, fmt.Errorf("forecast: level %g has %d steps, want %d", q, len(f.Quantiles[i]), horizon)
				}
				out := make([]float64, horizon)
				for h, v := range f.Quantiles[i] {
					out[h] = float64(v)
				}
				return out, nil
			}
		}
		return nil, fmt.Errorf("forecast: level %g missing from the response (levels %v)", q, resp.Quantiles)
	}
	var b bands
	var err error
	if b.Lower, err = level(0.1); err != nil {
		return bands{}, err
	}
	if b.Median, err = level(0.5); err != nil {
		return bands{}, err
	}
	if b.Upper, err = level(0.9); err != nil {
		return bands{}, err
	}
	if len(f.Timestamps) == horizon {
		b.Labels = f.Timestamps
	} else {
		b.Labels = make([]string, horizon)
		for i := range b.Labels {
			b.Labels[i] = "t+" + strconv.Itoa(i+1)
		}
	}
	return b, nil
}
