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
