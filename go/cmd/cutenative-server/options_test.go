package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cutenative/cutenative/go/internal/settings"
	"github.com/cutenative/cutenative/go/server"
)

func lookupIn(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// optionCase is how the table test exercises one setting: a value that parses (good, giving want), the
// default, and a value that does not ("" when every text is accepted) with the reason given.
type optionCase struct {
	get       func(o *options) any
	good      string
	want, def any
	bad, why  string
}

var optionCases = map[string]optionCase{
	"listen":               {func(o *options) any { return o.listen }, "0.0.0.0:9000", "0.0.0.0:9000", "127.0.0.1:8080", "8080", "want host:port"},
	"models":               {func(o *options) any { return o.models }, "a=/x,b=/y", "a=/x,b=/y", "", "nodir", "want name=dir"},
	"default-model":        {func(o *options) any { return o.defModel }, "b", "b", "", "", ""},
	"device":               {func(o *options) any { return o.device }, "cuda:1", "cuda:1", "cpu", "cuda:-1", "want cpu, cuda or cuda:N"},
	"dtype":                {func(o *options) any { return o.dtype }, "bf16", "bf16", "f32", "fp32", `want one of ["f32" "bf16" "f16"]`},
	"mode":                 {func(o *options) any { return o.mode }, "eager", "eager", "fused", "turbo", `want one of ["eager" "graph" "fused"]`},
	"threads":              {func(o *options) any { return o.threads }, "4", 4, 1, "-1", "must be >= 0"},
	"api-keys-file":        {func(o *options) any { return o.keysFile }, "/keys", "/keys", "", "", ""},
	"api-keys":             {func(o *options) any { return o.apiKeys }, "k1,k2", "k1,k2", "", "", ""},
	"max-body":             {func(o *options) any { return o.cfg.MaxBodyBytes }, "1024", int64(1024), int64(8 << 20), "1MB", "want an integer"},
	"max-batch":            {func(o *options) any { return o.cfg.MaxBatch }, "1", 1, 64, "lots", "want an integer"},
	"max-wait":             {func(o *options) any { return o.cfg.MaxWait }, "0", time.Duration(0), 2 * time.Millisecond, "5", "want a duration"},
	"queue":                {func(o *options) any { return o.cfg.QueueSize }, "8", 8, 256, "0", "must be >= 1"},
	"timeout":              {func(o *options) any { return o.cfg.Timeout }, "1m30s", 90 * time.Second, 30 * time.Second, "5", "want a duration"},
	"max-series":           {func(o *options) any { return o.cfg.MaxSeries }, "10", 10, 1024, "1.5", "want an integer"},
	"max-horizon":          {func(o *options) any { return o.cfg.MaxHorizon }, "64", 64, 65536, "-3", "must be >= 1"},
	"max-output-values":    {func(o *options) any { return o.cfg.MaxOutputValues }, "100", int64(100), int64(4 << 20), "x", "want an integer"},
	"max-input-values":     {func(o *options) any { return o.cfg.MaxInputValues }, "0x100", int64(256), int64(4 << 20), "1e6", "want an integer"},
	"max-series-len":       {func(o *options) any { return o.cfg.MaxSeriesLen }, "10", 10, 100000, "0", "must be >= 1"},
	"max-inflight":         {func(o *options) any { return o.cfg.MaxInflight }, "10", 10, 1024, "0", "must be >= 1"},
	"max-inflight-per-key": {func(o *options) any { return o.cfg.MaxInflightPerKey }, "10", 10, 0, "-1", "must be >= 0"},
	"long-queue":           {func(o *options) any { return o.cfg.LongQueue }, "10", 10, 4, "0", "must be >= 1"},
	"long-after":           {func(o *options) any { return o.cfg.LongAfter }, "10ms", 10 * time.Millisecond, 25 * time.Millisecond, "0s", "must be >= 1ms"},
	"long-slots":           {func(o *options) any { return o.cfg.LongSlots }, "3", 3, 0, "-1", "must be >= 0"},
	"max-inflight-bytes": {func(o *options) any { return o.cfg.MaxInflightBytes }, "1048576", int64(1 << 20), int64(256 << 20), "1000",
		"must be >= 1048576"},
	"max-call-bytes": {func(o *options) any { return o.cfg.MaxCallBytes }, "0x40000000", int64(1 << 30), int64(2 << 30), "1kB",
		"want an integer"},
	"idle-timeout": {func(o *options) any { return o.idleTimeout }, "2m", 2 * time.Minute, 30 * time.Second, "0s", "must be >= 1ms"},
	"read-header-timeout": {func(o *options) any { return o.readHeaderTimeout }, "500ms", 500 * time.Millisecond, 10 * time.Second, "3",
		"want a duration"},
	"max-images":       {func(o *options) any { return o.cfg.MaxImages }, "2", 2, 4, "0", "must be >= 1"},
	"batch-images":     {func(o *options) any { return o.cfg.BatchImages }, "true", true, false, "maybe", "want true or false"},
	"max-image-pixels": {func(o *options) any { return o.cfg.MaxImagePixels }, "65536", int64(65536), int64(2048 * 2048), "big", "want an integer"},
	"max-image-steps":  {func(o *options) any { return o.cfg.MaxImageSteps }, "50", 50, 100, "0", "must be >= 1"},
	"max-loras":        {func(o *options) any { return o.cfg.MaxLoRAs }, "1", 1, 3, "0", "must be >= 1"},
	"lora-default":     {func(o *options) any { return o.cfg.LoRADefault }, "auto", "auto", "none", "all", `want one of ["none" "auto"]`},
	"png-compression":  {func(o *options) any { return o.cfg.PNGCompression }, "best", "best", "speed", "fast", `want one of ["speed" "default" "best" "none"]`},
	"lora-dir":         {func(o *options) any { return o.cfg.LoRADir }, "/loras", "/loras", "", "", ""},
	"config":           {func(o *options) any { return o.configFile }, "/x.json", "/x.json", "", "", ""},
	"allowed-hosts":    {func(o *options) any { return o.allowedHosts }, "a.example,b:80", "a.example,b:80", "", "", ""},
	"max-conns":        {func(o *options) any { return o.maxConns }, "0", 0, 4096, "-1", "must be >= 0"},
	"lora-catalog":     {func(o *options) any { return o.lora.catalog }, "c.json", "c.json", "", "", ""},
	"embed-model":      {func(o *options) any { return o.lora.embedModel }, "dir", "dir", "", "", ""},
	"lora-poll":        {func(o *options) any { return o.lora.poll }, "0s", time.Duration(0), time.Second, "-1s", "must be >= 0s"},
	"log-level":        {func(o *options) any { return o.logLevel }, "debug", "debug", "info", "verbose", `want one of ["debug" "info" "warn" "error"]`},
	"log-format":       {func(o *options) any { return o.logFormat }, "json", "json", "text", "logfmt", `want one of ["text" "json"]`},
	"version":          {func(o *options) any { return o.version }, "true", true, false, "maybe", "want true or false"},
}

// Every setting of the table: its default, its flag, its environment variable, the flag winning, a bad value
// from either source refused with the flag or variable and the value, and its line in -h.
func TestOptionTable(t *testing.T) {
	table := optionTable()
	var help bytes.Buffer
	usage(&help)
	seen := map[string]bool{}
	for _, s := range table {
		if s.Where == settings.CodeOnly {
			continue
		}
		seen[s.Name] = true
		tc, ok := optionCases[s.Name]
		if !ok {
			t.Errorf("setting %q has no case in optionCases", s.Name)
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			load := func(args []string, env ...string) (options, error) {
				var o options
				err := settings.Load("cutenative-server", table, &o, args, lookupIn(env...))
				return o, err
			}
			o, err := load(nil)
			if err != nil || tc.get(&o) != tc.def {
				t.Fatalf("default: %v (%T) %v, want %v (%T)", tc.get(&o), tc.get(&o), err, tc.def, tc.def)
			}
			if o, err := load(nil, s.Env, tc.good); s.Env != "" && (err != nil || tc.get(&o) != tc.want) {
				t.Fatalf("%s=%s: %v %v, want %v", s.Env, tc.good, tc.get(&o), err, tc.want)
			}
			flagName := "-" + s.Name
			flagArgs := func(v string) []string { // a bool flag's value is joined to it (-version=true)
				if s.Bool {
					return []string{flagName + "=" + v}
				}
				return []string{flagName, v}
			}
			if s.Where == settings.EnvOnly {
				if _, err := load(flagArgs(tc.good)); err == nil {
					t.Fatalf("%s: an environment-only setting took a flag", flagName)
				}
			} else {
				if o, err := load(flagArgs(tc.good)); err != nil || tc.get(&o) != tc.want {
					t.Fatalf("%s %s: %v %v, want %v", flagName, tc.good, tc.get(&o), err, tc.want)
				}
				if o, err := load(flagArgs(tc.good), s.Env, s.Default); err != nil || tc.get(&o) != tc.want {
					t.Fatalf("the flag does not win over %s: %v %v", s.Env, tc.get(&o), err)
				}
			}
			if tc.bad != "" {
				var sources [][2]string
				if s.Env != "" {
					sources = append(sources, [2]string{s.Env, ""})
				}
				if s.Where != settings.EnvOnly {
					sources = append(sources, [2]string{flagName, "flag"})
				}
				for _, src := range sources {
					var err error
					if src[1] == "flag" {
						_, err = load(flagArgs(tc.bad), s.Env, tc.good)
					} else {
						_, err = load(nil, s.Env, tc.bad)
					}
					want := `invalid value "` + tc.bad + `" for ` + src[0] + ": " + tc.why
					if !errors.Is(err, settings.ErrInvalid) || !strings.Contains(err.Error(), want) {
						t.Fatalf("%s=%s: %v, want %q", src[0], tc.bad, err, want)
					}
				}
			}
			def := s.Default
			if def == "" {
				def = s.Unset
			}
			if def == "" {
				def = "none"
			}
			head := flagName + ", " + s.Env
			if s.Env == "" {
				head = flagName
			}
			if s.Where == settings.EnvOnly {
				head = s.Env + ", environment only"
			}
			if line := head + " (default " + def + ")\n"; !strings.Contains(help.String(), line) {
				t.Fatalf("-h lacks %q:\n%s", line, help.String())
			}
		})
	}
	for name := range optionCases {
		if !seen[name] {
			t.Errorf("optionCases has %q, the table does not", name)
		}
	}
}

// The README's option table names every flag and variable of the table.
func TestREADMENamesEveryOption(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range optionTable() {
		if s.Where == settings.CodeOnly {
			continue
		}
		if (s.Where != settings.EnvOnly && !bytes.Contains(b, []byte("`-"+s.Name+"`"))) || (s.Env != "" && !bytes.Contains(b, []byte("`"+s.Env+"`"))) {
			t.Errorf("README.md does not document -%s / %s", s.Name, s.Env)
		}
	}
}

// The command refuses wrong options with exit status 2 and a message naming them, before it loads anything.
func TestCLIRefusesBadOptions(t *testing.T) {
	tests := []struct {
		args []string
		env  []string
		code int
		want string
	}{
		{nil, []string{"CUTENATIVE_TIMEOUT", "5"}, 2, `invalid value "5" for CUTENATIVE_TIMEOUT: want a duration`},
		{nil, []string{"CUTENATIVE_MAX_BATCH", "lots", "CUTENATIVE_QUEUE", "-1"}, 2,
			"invalid value \"lots\" for CUTENATIVE_MAX_BATCH: want an integer\ninvalid value \"-1\" for CUTENATIVE_QUEUE: must be >= 1"},
		{[]string{"-max-batch", "lots"}, nil, 2, `invalid value "lots" for -max-batch: want an integer`},
		{[]string{"-no-such-flag"}, nil, 2, "flag provided but not defined: -no-such-flag"},
		{[]string{"-lora-catalog", "c.json"}, nil, 2, "-lora-catalog needs -embed-model"},
		{[]string{"-h"}, nil, 0, "-timeout, CUTENATIVE_TIMEOUT (default 30s)"},
	}
	for _, tc := range tests {
		var out bytes.Buffer
		if code := cli(tc.args, lookupIn(tc.env...), &out, &out); code != tc.code || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%v %v: exit %d, %q; want %d, %q", tc.args, tc.env, code, out.String(), tc.code, tc.want)
		}
	}
}

// The binary itself: a bad environment value ends the process with status 2 (run as a child of this test).
func TestMainExitStatus(t *testing.T) {
	if os.Getenv("CN_TEST_RUN_MAIN") == "1" {
		os.Args = []string{"cutenative-server"}
		main()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMainExitStatus$")
	cmd.Env = append(os.Environ(), "CN_TEST_RUN_MAIN=1", "CUTENATIVE_MAX_BATCH=lots")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), `invalid value "lots" for CUTENATIVE_MAX_BATCH`) {
		t.Fatalf("exit %v, output %s", err, out)
	}
}

// -models takes each model's own open options; the config file gives settings (under the environment and the
// flags) and models; -allowed-hosts defaults to the loopback names on a loopback address.
func TestModelOptionsAndConfigFile(t *testing.T) {
	specs, err := parseModels("img=/m/z;mode=eager;dtype=bf16;device=cuda:1, c2=/m/c")
	if err != nil {
		t.Fatal(err)
	}
	if specs["img"] != (modelSpec{dir: "/m/z", opts: server.ModelOptions{Device: "cuda:1", DType: "bf16", Mode: "eager"}}) ||
		specs["c2"] != (modelSpec{dir: "/m/c"}) {
		t.Fatalf("%+v", specs)
	}
	for spec, want := range map[string]string{
		"a=/x;mode=turbo":  `model "a": mode=turbo: want one of`,
		"a=/x;color=blue":  `model "a": unknown option "color"`,
		"a=/x,a=/y":        `model "a" given twice`,
		"a=/x;device=gpu0": `device=gpu0: want cpu, cuda or cuda:N`,
	} {
		if _, err := parseModels(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", spec, err, want)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "server.json")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"max-batch": 8, "timeout": "5s", "mode": "eager", "models": {"c2": "/m/c", "img": {"dir": "/m/z", "mode": "eager"}}}`)
	o, err := parseOptions([]string{"-config", path, "-max-batch", "4"}, lookupIn("CUTENATIVE_TIMEOUT", "7s"))
	if err != nil {
		t.Fatal(err)
	}
	if o.cfg.MaxBatch != 4 || o.cfg.Timeout != 7*time.Second || o.mode != "eager" || len(o.fileModels) != 2 ||
		o.fileModels["img"] != (modelSpec{dir: "/m/z", opts: server.ModelOptions{Mode: "eager"}}) {
		t.Fatalf("flag over environment over file: %+v", o)
	}
	if o, err := parseOptions(nil, lookupIn("CUTENATIVE_CONFIG", path)); err != nil || o.cfg.MaxBatch != 8 || o.cfg.Timeout != 5*time.Second {
		t.Fatalf("CUTENATIVE_CONFIG: %v %+v", err, o.cfg)
	}
	for body, want := range map[string]string{
		`{"max-bach": 8}`:       `unknown setting "max-bach"`,
		`{"max-batch": "many"}`: `invalid value "many" for ` + path + `: max-batch`,
		`{"models": {"a": {"dir": "/x", "mode": "turbo"}}}`: "models.a: mode=turbo",
		`{"models": ["a"]}`:     "models: want an object",
		`{"models": {"m": ""}}`: "models.m: a name and a dir are required",
	} {
		write(body)
		if _, err := parseOptions([]string{"-config=" + path}, lookupIn()); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
	for _, tc := range []struct {
		flag, listen string
		want         []string
	}{
		{"", "127.0.0.1:8080", []string{"localhost", "127.0.0.1", "::1"}},
		{"", "[::1]:8080", []string{"localhost", "127.0.0.1", "::1"}},
		{"", "localhost:8080", []string{"localhost", "127.0.0.1", "::1"}},
		{"", "127.0.1.1:8080", []string{"localhost", "127.0.0.1", "::1", "127.0.1.1"}},
		{"", "0.0.0.0:8080", nil},
		{"", ":8080", nil},
		{"api.example, *", "127.0.0.1:8080", []string{"api.example", "*"}},
	} {
		if got := allowedHosts(tc.flag, tc.listen); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%q %q: %v, want %v", tc.flag, tc.listen, got, tc.want)
		}
	}
}
