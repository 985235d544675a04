package jsonstrict

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name, in, want string // want: "" for nil, else a substring of the error
	}{
		{"object", `{"a": 1, "b": [1, 2, {"c": null}], "d": "x\"y"}`, ""},
		{"scalar", `42`, ""},
		{"spaces", " \n{ } \t", ""},
		{"empty", ``, "unexpected end"},
		{"only space", `  `, "unexpected end"},
		{"duplicate", `{"a": 1, "a": 2}`, `duplicate key "a"`},
		{"duplicate by case", `{"horizon": 1, "Horizon": 2}`, `duplicate key "Horizon"`},
		{"duplicate by escape", `{"ab": 1, "a\u0062": 2}`, `duplicate key "ab"`},
		{"duplicate by Unicode fold", `{"series": 1, "ſeries": 2}`, `duplicate key "ſeries"`},
		{"duplicate by escaped fold", `{"series": 1, "\u017feries": 2}`, `duplicate key "ſeries"`},
		{"Kelvin sign", `{"k": 1, "\u212a": 2}`, "duplicate key \"\u212a\""},
		{"duplicate nested", `{"x": [{"k": 1, "k": 2}]}`, `duplicate key "k"`},
		{"same key in sibling objects", `[{"k": 1}, {"k": 2}]`, ""},
		{"trailing brace", `{"a": 1}}`, "trailing data after the doc"},
		{"trailing bracket", `{"a": 1}]`, "trailing data"},
		{"trailing value", `{} {}`, "trailing data"},
		{"unclosed", `{"a": [1, 2`, "malformed JSON"},
		{"missing colon", `{"a" 1}`, "expected ':'"},
		{"bad separator", `[1; 2]`, "malformed JSON"},
		{"key not a string", `{a: 1}`, "expected a key"},
		{"control character", "{\"a\": \"x\ny\"}", "control character"},
		{"deep", strings.Repeat("[", 5) + strings.Repeat("]", 5), "nested deeper than 4"},
		{"deep enough", strings.Repeat("[", 4) + strings.Repeat("]", 4), ""},
		{"escaped quote in key", `{"a\"b": 1, "c": 2}`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Check([]byte(tc.in), 4, "doc")
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Check(%q) = %v, want %q", tc.in, err, tc.want)
			}
		})
	}
}

// Against encoding/json: a document it finds valid passes unless it has a duplicate key or is too deep; a
// document Check passes whose structure is broken is impossible (only scalar grammar is left to the decoder).
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"a": [1, {"b": "c"}], "d": null}`, `[[[]]]`, `{"a":1,"A":2}`, `"x"`, `{}}`, `1 2`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := Check(data, 8, "doc")
		if json.Valid(data) && err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "duplicate key") && !strings.HasPrefix(msg, "JSON nested deeper") {
				t.Fatalf("valid JSON %q refused: %v", data, err)
			}
		}
		if err == nil && !json.Valid(data) {
			// Only a scalar's grammar may be wrong: the decoder must fail on it, never on the structure.
			var v any
			if uerr := json.Unmarshal(data, &v); uerr == nil {
				t.Fatalf("%q: passed Check, invalid per json.Valid, yet decodes", data)
			}
		}
	})
}
