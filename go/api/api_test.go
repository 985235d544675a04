package api

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestEmbeddingInputJSON(t *testing.T) {
	tests := []struct {
		in   string
		want EmbeddingInput
		err  bool
	}{
		{`"one"`, EmbeddingInput{"one"}, false},
		{`["a", "b"]`, EmbeddingInput{"a", "b"}, false},
		{`[]`, EmbeddingInput{}, false},
		{`[1, 2]`, nil, true},
		{`5`, nil, true},
		{`{"a": 1}`, nil, true},
	}
	for _, tc := range tests {
		var got EmbeddingInput
		err := json.Unmarshal([]byte(tc.in), &got)
		if (err != nil) != tc.err || (!tc.err && !reflect.DeepEqual(got, tc.want)) {
			t.Fatalf("%s: %v %v, want %v (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// Both encodings read back as the same float32 bits, the awkward values included.
func TestEmbeddingVectorRoundTrip(t *testing.T) {
	values := []float32{0, -0.0, 1, -1, 0.1, 1.0 / 3, math.SmallestNonzeroFloat32, math.MaxFloat32, 1e-20, -123.456}
	values[1] = float32(math.Copysign(0, -1))
	for _, b64 := range []bool{false, true} {
		out, err := json.Marshal(Embedding{Object: "embedding", Embedding: EmbeddingVector{Values: values, Base64: b64}})
		if err != nil {
			t.Fatal(err)
		}
		if b64 != strings.Contains(string(out), `"embedding":"`) {
			t.Fatalf("base64 %v: %s", b64, out)
		}
		var back Embedding
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatal(err)
		}
		if back.Embedding.Base64 != b64 || len(back.Embedding.Values) != len(values) {
			t.Fatalf("base64 %v: %+v", b64, back)
		}
		for i, v := range values {
			if math.Float32bits(v) != math.Float32bits(back.Embedding.Values[i]) {
				t.Fatalf("base64 %v: value %d: %v read back as %v", b64, i, v, back.Embedding.Values[i])
			}
		}
	}
	// base64 of 1.0 little-endian: 00 00 80 3f.
	out, _ := json.Marshal(EmbeddingVector{Values: []float32{1}, Base64: true})
	if string(out) != `"AACAPw=="` {
		t.Fatalf("1.0 as base64: %s", out)
	}
	var v EmbeddingVector
	if err := json.Unmarshal([]byte(`"AACA"`), &v); err == nil {
		t.Fatal("3 bytes read as float32 values")
	}
	if out, _ := json.Marshal(EmbeddingVector{}); string(out) != "[]" {
		t.Fatalf("no values: %s", out)
	}
}

// samples is Kronos' object of channels or Toto's array of paths, and reads back as what was written; Toto's
// sampling carries no temperature, top_k or top_p.
func TestSamplesAndSamplingJSON(t *testing.T) {
	tests := []struct {
		in   SeriesForecast
		want string
	}{
		{SeriesForecast{Samples: &Samples{Paths: [][]float32{{1, 2}, {3, 4}}}}, `{"samples":[[1,2],[3,4]]}`},
		{SeriesForecast{Samples: &Samples{BarSamples: &BarSamples{Open: [][]float32{{1}}, High: [][]float32{{2}}, Low: [][]float32{{3}},
			Close: [][]float32{{4}}}}}, `{"samples":{"open":[[1]],"high":[[2]],"low":[[3]],"close":[[4]]}}`},
		{SeriesForecast{MeanPath: []float32{0.5}}, `{"mean_path":[0.5]}`},
	}
	for _, tc := range tests {
		out, err := json.Marshal(tc.in)
		if err != nil || string(out) != tc.want {
			t.Fatalf("%+v: %s %v, want %s", tc.in, out, err, tc.want)
		}
		var back SeriesForecast
		if err := json.Unmarshal(out, &back); err != nil || !reflect.DeepEqual(back, tc.in) {
			t.Fatalf("%s read back as %+v (%v)", out, back, err)
		}
	}
	var bad Samples
	if err := json.Unmarshal([]byte(`"x"`), &bad); err == nil {
		t.Fatal("a string read as samples")
	}
	for _, tc := range []struct {
		in   Sampling
		want string
	}{
		{Sampling{Temperature: 1, TopP: 0.9, SampleCount: 3, Seed: 7}, `{"temperature":1,"top_k":0,"top_p":0.9,"sample_count":3,"seed":7}`},
		{Sampling{SampleCount: 8, SamplesPerBatch: 4, KVCache: true, Seed: 7}, `{"sample_count":8,"samples_per_batch":4,"kv_cache":true,"seed":7}`},
		{Sampling{SampleCount: 8, SamplesPerBatch: 8, Seed: 1}, `{"sample_count":8,"samples_per_batch":8,"kv_cache":false,"seed":1}`},
	} {
		out, err := json.Marshal(tc.in)
		if err != nil || string(out) != tc.want {
			t.Fatalf("%+v: %s %v, want %s", tc.in, out, err, tc.want)
		}
		var back Sampling
		if err := json.Unmarshal(out, &back); err != nil || back != tc.in {
			t.Fatalf("%s read back as %+v (%v)", out, back, err)
		}
	}
}
