package server

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/cutenative/cutenative/go/api"
)

// openapi-spec-validator (PyPI, installed by scripts/setup.sh into the project venv) validates the document as
// OpenAPI 3.0.3. Without it the test skips, unless CN_REQUIRE_OPENAPI_VALIDATOR=1 (scripts/test.sh).
func TestOpenAPIValidates(t *testing.T) {
	venv := os.Getenv("CN_VENV")
	if venv == "" {
		cache := os.Getenv("CN_CACHE")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache", "cutenative")
		}
		venv = filepath.Join(cache, "venv")
	}
	bin := filepath.Join(venv, "bin", "openapi-spec-validator")
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CN_REQUIRE_OPENAPI_VALIDATOR") == "1" {
			t.Fatalf("CN_REQUIRE_OPENAPI_VALIDATOR=1 but %s is missing (run scripts/setup.sh)", bin)
		}
		t.Skipf("no %s (scripts/setup.sh installs it)", bin)
	}
	if out, err := exec.Command(bin, "openapi.json").CombinedOutput(); err != nil {
		t.Fatalf("openapi-spec-validator: %v\n%s", err, out)
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
	}
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil || doc.OpenAPI != "3.0.3" {
		t.Fatalf("openapi %q (%v), want 3.0.3", doc.OpenAPI, err)
	}
}

// The 200 bodies' schemas match the Go types the server encodes: the same properties as the types' JSON
// fields and, required, exactly the fields encoded without omitempty (always present), recursively.
func TestOpenAPIResponsesMatchGoTypes(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatal(err)
	}
	resolve := func(s map[string]any) map[string]any {
		for {
			ref, ok := s["$ref"].(string)
			if !ok {
				return s
			}
			name := strings.TrimPrefix(ref, "#/components/schemas/")
			s, _ = doc["components"].(map[string]any)["schemas"].(map[string]any)[name].(map[string]any)
			if s == nil {
				t.Fatalf("dangling %s", ref)
			}
		}
	}
	custom := reflect.TypeOf((*json.Marshaler)(nil)).Elem()
	var check func(where string, s map[string]any, typ reflect.Type)
	check = func(where string, s map[string]any, typ reflect.Type) {
		s = resolve(s)
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if typ.Implements(custom) {
			return // its own encoding (EmbeddingVector: an array or a string): described by oneOf
		}
		switch typ.Kind() {
		case reflect.Slice:
			items, ok := s["items"].(map[string]any)
			if s["type"] != "array" || !ok {
				t.Fatalf("%s: %s, want an array schema", where, typ)
			}
			check(where+"[]", items, typ.Elem())
		case reflect.Struct:
			props, _ := s["properties"].(map[string]any)
			var fields, required, documented, docRequired []string
			for i := 0; i < typ.NumField(); i++ {
				f := typ.Field(i)
				name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
				if name == "-" || !f.IsExported() {
					continue
				}
				fields = append(fields, name)
				if !strings.Contains(opts, "omitempty") {
					required = append(required, name)
				}
				p, ok := props[name].(map[string]any)
				if !ok {
					t.Fatalf("%s: the Go field %s.%s (%q) is not documented", where, typ.Name(), f.Name, name)
				}
				check(where+"."+name, p, f.Type)
			}
			for name := range props {
				documented = append(documented, name)
			}
			req, _ := s["required"].([]any)
			for _, r := range req {
				docRequired = append(docRequired, r.(string))
			}
			for _, l := range [][]string{fields, required, documented, docRequired} {
				sort.Strings(l)
			}
			if strings.Join(fields, ",") != strings.Join(documented, ",") {
				t.Fatalf("%s: properties %v, but %s encodes %v", where, documented, typ, fields)
			}
			if strings.Join(required, ",") != strings.Join(docRequired, ",") {
				t.Fatalf("%s: required %v, but %s always encodes %v", where, docRequired, typ, required)
			}
		}
	}
	// The response schemas by name, and the Go type the server encodes for each.
	goTypes := map[string]any{
		"ForecastResponse":   api.ForecastResponse{},
		"ModelList":          api.ModelList{},
		"EmbeddingResponse":  api.EmbeddingResponse{},
		"LoRASearchResponse": api.LoRASearchResponse{},
		"LoRAList":           api.LoRAList{},
		"ImagesResponse":     api.ImagesResponse{},
		"Error":              api.ErrorResponse{},
	}
	components := doc["components"].(map[string]any)
	seen := map[string]bool{}
	for path, ops := range doc["paths"].(map[string]any) {
		for method, op := range ops.(map[string]any) {
			for status, r := range op.(map[string]any)["responses"].(map[string]any) {
				r := r.(map[string]any)
				if ref, ok := r["$ref"].(string); ok {
					r = components["responses"].(map[string]any)[strings.TrimPrefix(ref, "#/components/responses/")].(map[string]any)
				}
				content, _ := r["content"].(map[string]any)
				js, _ := content["application/json"].(map[string]any)
				schema, _ := js["schema"].(map[string]any)
				ref, _ := schema["$ref"].(string)
				name := strings.TrimPrefix(ref, "#/components/schemas/")
				v, ok := goTypes[name]
				if !ok {
					if js != nil && status == "200" && !strings.HasPrefix(path, "/livez") && !strings.HasPrefix(path, "/readyz") &&
						path != "/openapi.json" {
						t.Fatalf("%s %s %s: a JSON response without a Go type to check", method, path, status)
					}
					continue // health answers: {"status": ...}; this document
				}
				seen[name] = true
				check(strings.ToUpper(method)+" "+path+" "+status, schema, reflect.TypeOf(v))
			}
		}
	}
	for k := range goTypes {
		if !seen[k] {
			t.Fatalf("%s: no response of the document uses it", k)
		}
	}
}
