package server

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cutenative/cutenative/go/internal/settings"
)

// DefaultConfig and New's zero-value defaults both come from the settings table.
func TestConfigDefaultsComeFromTheTable(t *testing.T) {
	want := Config{MaxBodyBytes: 8 << 20, MaxBatch: 64, MaxWait: 2 * time.Millisecond, QueueSize: 256, Timeout: 30 * time.Second,
		MaxSeries: 1024, MaxSeriesLen: 100000, MaxHorizon: 65536, MaxOutputValues: 4 << 20, MaxInputValues: 4 << 20,
		MaxInflight: 1024, LongAfter: 25 * time.Millisecond, LongQueue: 4, MaxInflightBytes: 256 << 20, MaxCallBytes: 2 << 30}
	got := DefaultConfig()
	if !sameLimits(got, want) {
		t.Fatalf("DefaultConfig %+v, want %+v", got, want)
	}
	s, err := New(Config{Models: map[string]string{"m": "dir"}})
	if err != nil {
		t.Fatal(err)
	}
	want.MaxWait = 0 // 0 is a value MaxWait accepts (no waiting): it is kept
	if cfg := s.Config(); !sameLimits(cfg, want) || cfg.DefaultModel != "" || cfg.LongSlots < 1 {
		t.Fatalf("New(zero limits) %+v, want %+v", cfg, want)
	}
	names := map[string]bool{}
	for _, st := range Settings() {
		if names[st.Name] {
			t.Fatalf("two settings named %q", st.Name)
		}
		names[st.Name] = true
		if (st.Where == settings.CodeOnly) != (st.Env == "") {
			t.Fatalf("%s: a setting users can give has an environment variable, a code-only one none", st.Name)
		}
	}
}

func sameLimits(a, b Config) bool {
	a.Models, b.Models, a.DefaultModel, b.DefaultModel = nil, nil, "", ""
	return a.MaxBodyBytes == b.MaxBodyBytes && a.MaxBatch == b.MaxBatch && a.MaxWait == b.MaxWait &&
		a.QueueSize == b.QueueSize && a.Timeout == b.Timeout && a.MaxSeries == b.MaxSeries && a.MaxSeriesLen == b.MaxSeriesLen &&
		a.MaxHorizon == b.MaxHorizon && a.MaxOutputValues == b.MaxOutputValues && a.MaxInputValues == b.MaxInputValues &&
		a.MaxInflight == b.MaxInflight && a.LongAfter == b.LongAfter && a.LongQueue == b.LongQueue &&
		a.MaxInflightBytes == b.MaxInflightBytes && a.MaxCallBytes == b.MaxCallBytes
}

// A value out of range set in code is refused with the setting's name, never replaced by a default.
func TestConfigOutOfRangeIsRefused(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{MaxBatch: -1}, `"-1" for max-batch: must be >= 1`},
		{Config{MaxWait: -time.Millisecond}, `"-1ms" for max-wait: must be >= 0s`},
		{Config{Timeout: time.Microsecond}, `"1µs" for timeout: must be >= 1ms`},
		{Config{MaxInflight: -5}, `"-5" for max-inflight`},
		{Config{LongAfter: -1, QueueSize: -1}, "for long-after"},
		{Config{MaxInflightBytes: 1000}, `"1000" for max-inflight-bytes: must be >= 1048576`},
	}
	for _, tc := range tests {
		tc.cfg.Models = map[string]string{"m": "dir"}
		_, err := New(tc.cfg)
		if !errors.Is(err, settings.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// LoRA settings that could only fail every image request later are refused at New.
func TestConfigLoRATraps(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{LoRADir: "/srv/loras"}, "lora-catalog"},
		{Config{LoRADefault: "auto"}, "lora-catalog and lora-dir"},
		{Config{LoRADefault: "auto", LoRACatalog: "c.json", EmbedModel: "e"}, "lora-catalog and lora-dir"},
		{Config{LoRACatalog: "c.json"}, "sentence-embedding model"},
	} {
		tc.cfg.Models = map[string]string{"m": "dir"}
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
