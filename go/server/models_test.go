package server

import (
	"encoding/json"
	"testing"
	"time"
)

// GET /v1/models is OpenAI's list: {"object": "list", "data": [{"id", "object": "model", "created",
// "owned_by"}, ...]}, with cutenative's fields beside; read as a generic client would.
func TestModelsOpenAIShape(t *testing.T) {
	before := time.Now().Unix()
	ts := start(t, Config{Models: map[string]string{"b": defaultModelDir, "a": defaultModelDir}, DefaultModel: "b"})
	code, body := ts.get(t, "/v1/models")
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	var list struct {
		Object string           `json:"object"`
		Data   []map[string]any `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	if list.Object != "list" || len(list.Data) != 2 {
		t.Fatalf("%s", body)
	}
	for i, want := range []struct {
		id      string
		deflt   bool
		context float64
	}{{"a", false, 0}, {"b", true, 0}} {
		e := list.Data[i]
		created, _ := e["created"].(float64)
		if e["id"] != want.id || e["object"] != "model" || e["owned_by"] != "cutenative" || e["name"] != want.id ||
			e["kind"] != "chronos2" || e["default"] != want.deflt || int64(created) < before || int64(created) > time.Now().Unix() {
			t.Fatalf("entry %d: %v", i, e)
		}
		for _, k := range []string{"device", "dtype", "mode", "parameters", "context_length", "native_horizon", "max_horizon", "quantiles"} {
			if _, ok := e[k]; !ok {
				t.Fatalf("entry %d lacks %q: %v", i, k, e)
			}
		}
		if _, ok := e["embedding_dim"]; ok {
			t.Fatalf("a forecaster with embedding_dim: %v", e)
		}
	}
}
