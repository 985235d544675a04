package cutenative

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// writeSafetensors writes F32 tensors (name -> shape), filled with small deterministic values.
func writeSafetensors(t *testing.T, path string, shapes map[string][]int64) {
	t.Helper()
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	header := map[string]any{}
	var data []byte
	for i, n := range names {
		count := int64(1)
		for _, d := range shapes[n] {
			count *= d
		}
		begin := len(data)
		for k := int64(0); k < count; k++ {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32((int64(i)*31+k)%17)/170-0.05))
		}
		header[n] = map[string]any{"dtype": "F32", "shape": shapes[n], "data_offsets": []int{begin, len(data)}}
	}
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(append(out, h...), data...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeChronos2 writes a small random-weight Chronos-2 checkpoint (real parameter names) into a temp dir.
func writeChronos2(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	const D, I, F, p, Q, L = 8, 8, 16, 4, 3, 2
	s := map[string][]int64{"shared.weight": {2, D}, "encoder.final_layer_norm.weight": {D}}
	block := func(pre string, in, out int64) {
		s[pre+".hidden_layer.weight"] = []int64{F, in}
		s[pre+".hidden_layer.bias"] = []int64{F}
		s[pre+".output_layer.weight"] = []int64{out, F}
		s[pre+".output_layer.bias"] = []int64{out}
		s[pre+".residual_layer.weight"] = []int64{out, in}
		s[pre+".residual_layer.bias"] = []int64{out}
	}
	block("input_patch_embedding", 3*p, D)
	block("output_patch_embedding", D, Q*p)
	for i := 0; i < L; i++ {
		b := fmt.Sprintf("encoder.block.%d.layer.", i)
		for _, sub := range []string{"0", "1"} {
			s[b+sub+".layer_norm.weight"] = []int64{D}
			for _, w := range []string{"q", "k", "v"} {
				s[b+sub+".self_attention."+w+".weight"] = []int64{I, D}
			}
			s[b+sub+".self_attention.o.weight"] = []int64{D, I}
		}
		s[b+"2.layer_norm.weight"] = []int64{D}
		s[b+"2.mlp.wi.weight"] = []int64{F, D}
		s[b+"2.mlp.wo.weight"] = []int64{D, F}
	}
	writeSafetensors(t, filepath.Join(dir, "model.safetensors"), s)
	cfg := `{"architectures": ["Chronos2Model"], "d_model": 8, "d_kv": 4, "d_ff": 16, "num_layers": 2,
	  "num_heads": 2, "chronos_config": {"context_length": 64, "input_patch_size": 4, "input_patch_stride": 4,
	  "output_patch_size": 4, "max_output_patches": 4, "quantiles": [0.1, 0.5, 0.9],
	  "use_reg_token": true, "use_arcsinh": true}}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func mustContain(t *testing.T, s, sub string) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Fatalf("%q does not contain %q", s, sub)
	}
}
