package cutenative

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestVersion(t *testing.T) {
	major, minor := ABIVersion()
	if major != ABIMajor || minor < ABIMinor {
		t.Fatalf("library ABI %d.%d, package %d.%d", major, minor, ABIMajor, ABIMinor)
	}
	if Version() == "" {
		t.Fatal("empty version")
	}
	mustContain(t, BuildInfo(), Version())
	if n := CUDADeviceCount(); n < 0 {
		t.Fatalf("device count %d", n)
	}
}

// The library sets MKL's reproducibility mode when it loads (unless MKL_CBWR is set): with an MKL LibTorch
// (every x86-64 wheel) CPU forecasts are batch- and thread-invariant, which the server's merging relies on.
func TestCPUNumerics(t *testing.T) {
	n := CPUNumericsInfo()
	mustContain(t, n.Description, "processor: ")
	if n.ThreadInvariant && !n.BatchInvariant {
		t.Fatalf("thread-invariant without batch invariance: %+v", n)
	}
	if strings.Contains(n.Description, "Math Kernel Library") && os.Getenv("MKL_CBWR") == "" &&
		(!n.BatchInvariant || !n.ThreadInvariant) {
		t.Fatalf("MKL present and MKL_CBWR unset, yet not reproducible: %+v", n)
	}
}

func TestCheckABI(t *testing.T) {
	tests := []struct {
		name         string
		major, minor uint32
		ok           bool
	}{
		{"same", ABIMajor, ABIMinor, true},
		{"newer minor", ABIMajor, ABIMinor + 3, true},
		{"older minor", ABIMajor, ABIMinor - 1, ABIMinor == 0},
		{"other major", ABIMajor + 1, ABIMinor, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkABI(tc.major, tc.minor)
			if (err == nil) != tc.ok {
				t.Fatalf("checkABI(%d, %d) = %v, want ok=%v", tc.major, tc.minor, err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrIncompatible) {
				t.Fatalf("error %v is not ErrIncompatible", err)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	empty := t.TempDir()
	badCfg := t.TempDir()
	if err := os.WriteFile(filepath.Join(badCfg, "config.json"), []byte(`{"architectures": ["Chronos2Model"], "d_model": "x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		dir     string
		opts    *Options
		want    error
		message string
	}{
		{"missing dir", "/nonexistent/cutenative", nil, ErrNotFound, "no such directory"},
		{"no config", empty, nil, ErrNotFound, "config.json: no such file"},
		{"bad config", badCfg, nil, ErrModelFormat, "field 'd_model'"},
		{"bad device", empty, &Options{Device: "tpu"}, ErrInvalidArgument, "device"},
		{"bad dtype", empty, &Options{DType: "f64"}, ErrInvalidArgument, "dtype"},
		{"bad mode", empty, &Options{Mode: "warp"}, ErrInvalidArgument, "mode"},
		{"negative threads", empty, &Options{Threads: -1}, ErrInvalidArgument, "threads"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Open(tc.dir, tc.opts)
			if err == nil {
				m.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not *Error", err)
			}
			mustContain(t, ce.Message, tc.message)
		})
	}
}

func TestOpenChronos2(t *testing.T) {
	m, err := Open(writeChronos2(t), &Options{DType: "bf16"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	info, err := m.Info()
	if err != nil {
		t.Fatal(err)
	}
	want := Info{Kind: "chronos2", Device: "cpu", DType: "bf16", Mode: "eager", ContextLength: 64,
		NativeHorizon: 16, MaxHorizon: info.MaxHorizon, DefaultQuantiles: 3,
		Parameters: info.Parameters, WeightBytes: info.Parameters * 2}
	if info != want {
		t.Fatalf("info %+v\nwant %+v", info, want)
	}
	q, err := m.Quantiles()
	if err != nil || len(q) != 3 || q[1] != 0.5 {
		t.Fatalf("quantiles %v, %v", q, err)
	}
	desc, err := m.Describe()
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal([]byte(desc), &d); err != nil {
		t.Fatalf("describe is not JSON: %v", err)
	}
	if d["kind"] != "chronos2" {
		t.Fatalf("describe kind %v", d["kind"])
	}
	if err := m.SetMode("graph"); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("graph mode on CPU: %v", err)
	}
	if err := m.SetMode("eager"); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentUseAndClose(t *testing.T) {
	m, err := Open(writeChronos2(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if _, err := m.Info(); err != nil && !errors.Is(err, ErrClosed) {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = m.Close()
	}()
	wg.Wait()
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := m.Info(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Info after Close: %v", err)
	}
}

func TestEmbedAndGenerateUnsupportedOnForecasters(t *testing.T) {
	m, err := Open(writeChronos2(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Embed(context.Background(), []string{"a knight in shining armour"}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Embed: %v", err)
	}
	if _, err := m.Embed(context.Background(), nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Embed(nil): %v", err)
	}
	_, err = m.Generate(context.Background(), &GenerateRequest{Prompt: "a lighthouse", Width: 64, Height: 64})
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Generate: %v", err)
	}
	mustContain(t, err.Error(), "chronos2 models cannot generate images")
	// A request the ABI refuses by itself is ErrInvalidArgument before the model is asked; one only a model that
	// generates could judge (the size multiple) is the model kind's ErrUnsupported.
	if _, err := m.Generate(context.Background(), &GenerateRequest{Prompt: "x", Width: 5000, Height: 64}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("width 5000: %v", err)
	}
	if _, err := m.Generate(context.Background(), &GenerateRequest{Prompt: "x", Width: 17, Height: 64}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("width 17: %v", err)
	}
	info, err := m.Info()
	if err != nil || info.ImageSizeMultiple != 0 || info.DefaultSteps != 0 || info.DefaultGuidance != 0 {
		t.Fatalf("a forecaster's image facts: %+v, %v", info, err)
	}
}

func TestModesAreTheLibrarysTable(t *testing.T) {
	got := Modes()
	want := []string{"eager", "graph", "fused"}
	if len(got) != len(want) {
		t.Fatalf("Modes() = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Modes() = %q, want %q", got, want)
		}
	}
	if modeList() != "eager, graph or fused" {
		t.Fatalf("modeList() = %q", modeList())
	}
}
