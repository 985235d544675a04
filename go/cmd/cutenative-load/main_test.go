package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		out := make([]time.Duration, len(vs))
		for i, v := range vs {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{nil, 50, 0},
		{ms(7), 50, 7 * time.Millisecond},
		{ms(7), 99, 7 * time.Millisecond},
		{ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{ms(1, 2, 3, 4), 99, 4 * time.Millisecond},
		{ms(1, 2, 3, 4, 5), 50, 3 * time.Millisecond},
		{ms(hundred...), 50, 50 * time.Millisecond},
		{ms(hundred...), 99, 99 * time.Millisecond},
		{ms(hundred...), 100, 100 * time.Millisecond},
		{ms(hundred...), 0.001, 1 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := percentile(tt.sorted, tt.p); got != tt.want {
			t.Errorf("percentile(%d values, %g) = %v, want %v", len(tt.sorted), tt.p, got, tt.want)
		}
	}
}

func TestCheckLoopback(t *testing.T) {
	lookup := func(_ context.Context, host string) ([]net.IPAddr, error) {
		switch host {
		case "localhost":
			return []net.IPAddr{{IP: net.ParseIP("127.0.0.1")}, {IP: net.ParseIP("::1")}}, nil
		case "mixed.test":
			return []net.IPAddr{{IP: net.ParseIP("127.0.0.1")}, {IP: net.ParseIP("10.1.2.3")}}, nil
		case "remote.test":
			return []net.IPAddr{{IP: net.ParseIP("93.184.216.34")}}, nil
		case "empty.test":
			return nil, nil
		}
		return nil, errors.New("no such host")
	}
	tests := []struct {
		url     string
		wantErr string // "" for no error
	}{
		{"http://127.0.0.1:8080", ""},
		{"http://127.1.2.3:8080/", ""},
		{"http://[::1]:8080", ""},
		{"https://localhost", ""},
		{"http://10.0.0.1:8080", "not a loopback address"},
		{"http://0.0.0.0:8080", "not a loopback address"},
		{"http://[::]:8080", "not a loopback address"},
		{"http://remote.test", "resolves to 93.184.216.34"},
		{"http://mixed.test", "resolves to 10.1.2.3"},
		{"http://empty.test", "resolves to no address"},
		{"http://nowhere.test", "no such host"},
		{"ftp://127.0.0.1", "scheme must be http or https"},
		{"127.0.0.1:8080", "-url: parse"},
		{"http://", "no host"},
	}
	for _, tt := range tests {
		err := checkLoopback(context.Background(), tt.url, lookup)
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("checkLoopback(%q) = %v, want error containing %q", tt.url, err, tt.wantErr)
		}
	}
}

func TestLoopbackOnly(t *testing.T) {
	tests := []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:80", true},
		{"[::1]:80", true},
		{"192.168.0.1:80", false},
		{"[2001:db8::1]:80", false},
		{"nonsense", false},
	}
	for _, tt := range tests {
		if err := loopbackOnly("tcp", tt.addr, nil); (err == nil) != tt.ok {
			t.Errorf("loopbackOnly(%q) = %v, want ok=%v", tt.addr, err, tt.ok)
		}
	}
}

func TestParseLevels(t *testing.T) {
	tests := []struct {
		in   string
		want []int
	}{
		{"1,16,64", []int{1, 16, 64}},
		{" 4 , 8", []int{4, 8}},
		{"1024", []int{1024}},
		{"", nil},
		{"0", nil},
		{"1,,2", nil},
		{"x", nil},
		{"1025", nil},
	}
	for _, tt := range tests {
		got, err := parseLevels(tt.in)
		if (err != nil) != (tt.want == nil) || len(got) != len(tt.want) {
			t.Errorf("parseLevels(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("parseLevels(%q) = %v, want %v", tt.in, got, tt.want)
			}
		}
	}
}

func TestParseValues(t *testing.T) {
	tests := []struct {
		in      string
		want    []float64 // NaN = missing
		wantErr bool
	}{
		{"month,value\n1949-01,112\n1949-02,\n1949-03, 3.5\n", []float64{112, math.NaN(), 3.5}, false},
		{"t,v\r\na,1\r\n", []float64{1}, false},
		{"t,v\n", nil, true},
		{"", nil, true},
		{"t,v\na\n", nil, true},
		{"t,v\na,b\n", nil, true},
		{"t,v\na,Inf\n", nil, true},
	}
	for _, tt := range tests {
		got, err := parseValues(strings.NewReader(tt.in))
		if (err != nil) != tt.wantErr || len(got) != len(tt.want) {
			t.Errorf("parseValues(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] && !(math.IsNaN(got[i]) && math.IsNaN(tt.want[i])) {
				t.Errorf("parseValues(%q) = %v, want %v", tt.in, got, tt.want)
				break
			}
		}
	}
}

func TestRequestBody(t *testing.T) {
	b, err := requestBody([]float64{1, math.NaN(), 2.5}, 12, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"horizon":12,"series":[{"values":[1,null,2.5]}]}`; string(b) != want {
		t.Errorf("body = %s, want %s", b, want)
	}
}

// TestRunFakeServer runs two short levels against a fake server that
// throttles every third request.
func TestRunFakeServer(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Horizon int
			Series  []struct{ Values []*float64 }
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.URL.Path != "/v1/forecast" ||
			req.Horizon != 3 || len(req.Series) != 1 || len(req.Series[0].Values) != 512 {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"error":{"code":"invalid_argument","message":"bad test request"}}`))
			return
		}
		if r.Header.Get("Authorization") != "Bearer k" {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"code":"unauthenticated","message":"bad key"}}`))
			return
		}
		if n.Add(1)%3 == 0 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"error":{"code":"resource_exhausted","message":"queue full"}}`))
			return
		}
		time.Sleep(time.Millisecond)
		w.Write([]byte(`{"model":"default","horizon":3,"quantiles":[0.5],"forecasts":[{"quantiles":[[1,2,3]]}]}`))
	}))
	defer srv.Close()

	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"-url", srv.URL, "-csv", "", "-horizon", "3", "-key", "k", "-length", "512",
		"-concurrency", "1,4", "-duration", "1s", "-label", "test"}, &out, &errOut)
	if err != nil {
		t.Fatalf("run: %v (stderr %s)", err, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || lines[0] != strings.Split(tableHeader, "\n")[0] {
		t.Fatalf("output:\n%s", out.String())
	}
	for i, conc := range []string{"1", "4"} {
		cells := strings.Split(strings.Trim(lines[2+i], "| "), " | ")
		if len(cells) != 8 || cells[0] != "test" || cells[1] != conc {
			t.Fatalf("row %q", lines[2+i])
		}
		if cells[2] == "0" || cells[3] == "0" || cells[3] != cells[4] || cells[6] == "-" {
			t.Errorf("row %q: want requests, errors = 429s > 0 and latencies", lines[2+i])
		}
	}

	// A bad key fails on the first request, with the server's message.
	err = run(context.Background(), []string{"-url", srv.URL, "-csv", "", "-horizon", "3", "-key", "wrong", "-length", "512",
		"-duration", "100ms"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "401 Unauthorized: bad key (unauthenticated)") {
		t.Errorf("bad key: err = %v", err)
	}
}

func TestRunRefuses(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"-url", "http://10.0.0.1:8080", "-csv", ""}, "not a loopback address"},
		{[]string{"-duration", "6m", "-csv", ""}, "-duration must be in"},
		{[]string{"-concurrency", "0"}, "bad level"},
		{[]string{"-csv", "/nonexistent.csv"}, "use -csv ''"},
		{[]string{"-csv", "", "-length", "0"}, "-length must be in"},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		err := run(context.Background(), tt.args, &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("run(%q) = %v, want error containing %q", tt.args, err, tt.wantErr)
		}
	}
}
