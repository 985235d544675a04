package jsonstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/cutenative/cutenative/go/internal/jsonstrict"
)

// decodeAny reads any document into the values encoding/json produces for interface{} (float64 numbers).
func decodeAny(r *Reader) (any, error) {
	k, err := r.Peek()
	if err != nil {
		return nil, err
	}
	switch k {
	case Object:
		m := map[string]any{}
		err := r.Object(func(key string) error {
			v, err := decodeAny(r)
			m[key] = v
			return err
		})
		return m, err
	case Array:
		a := []any{}
		err := r.Array(func(int) error {
			v, err := decodeAny(r)
			a = append(a, v)
			return err
		})
		return a, err
	case String:
		return r.String(1 << 20)
	case Number:
		return r.Number()
	case Bool:
		return r.Bool()
	default:
		_, err := r.Null()
		return nil, err
	}
}

func readAll(src io.Reader) (any, error) {
	r := NewReader(src, 512, 16)
	v, err := decodeAny(r)
	if err != nil {
		return nil, err
	}
	return v, r.End()
}

var validDocs = []string{
	`{}`, `[]`, `"x"`, `0`, `-0`, `1.5e-3`, `true`, `false`, `null`, ` {"a" : [1, 2, {"b": null}], "c": "d"} `,
	`{"s": "\u00e9\ud83d\ude00\n\t\"\\\/"}`, `[-1.25E+10, 1e308, 5e-324, 123456789012345678]`,
	`{"long": "` + strings.Repeat("abcdefgh", 200) + `"}`, `[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]`,
	`"\ud800"`, `"\udc00x"`, `"\ud800\u0041"`, `"\ud800\n"`, `"\ud83d\ude00"`, `"é"`,
}

// Every valid document reads as encoding/json reads it, whatever the chunks the source hands out.
func TestMatchesEncodingJSON(t *testing.T) {
	for _, doc := range validDocs {
		var want any
		if err := json.Unmarshal([]byte(doc), &want); err != nil {
			t.Fatalf("%s: encoding/json: %v", doc, err)
		}
		for name, src := range map[string]io.Reader{"whole": strings.NewReader(doc),
			"bytes": iotest.OneByteReader(strings.NewReader(doc)), "half": iotest.HalfReader(strings.NewReader(doc))} {
			got, err := readAll(src)
			if err != nil {
				t.Fatalf("%s (%s): %v", doc, name, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s (%s): got %#v, want %#v", doc, name, got, want)
			}
		}
	}
}

func TestRefusals(t *testing.T) {
	tests := []struct{ doc, want string }{
		{`{"a": 1, "a": 2}`, "a: duplicate key"},
		{`{"a": {"b": 1, "b": 1}}`, "a.b: duplicate key"},
		{`[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]`, "JSON nested deeper than 16 levels"},
		{`{} x`, "trailing data"},
		{`{}}`, "trailing data"},
		{`[1,]`, "malformed JSON"},
		{`[01]`, `invalid number "01"`},
		{`[1.]`, `invalid number "1."`},
		{`[.5]`, "unexpected character"},
		{`[+1]`, "unexpected character"},
		{`[1e]`, `invalid number "1e"`},
		{`[-]`, `invalid number "-"`},
		{`[1e400]`, "[0]: the number 1e400 is out of range"},
		{`[tru]`, "invalid literal"},
		{`[truex]`, "after a value"},
		{`[nul`, "unexpected end"},
		{`"a` + "\x01" + `"`, "control character"},
		{`"a` + "\xff" + `"`, "not valid UTF-8"},
		{`"\x"`, "invalid escape"},
		{`"\u12"`, `invalid \u escape`},
		{`{"a" 1}`, "expected ':'"},
		{`{1: 2}`, "expected a string key"},
		{`{"a": 1 "b": 2}`, "expected ',' or '}'"},
		{`[1 2]`, "expected ',' or ']'"},
		{``, "unexpected end of document"},
		{`   `, "unexpected end of document"},
		{`{"a": [1, 2`, "unexpected end of document"},
		{`[` + strings.Repeat("1", MaxNumberBytes+1) + `]`, "longer than 64 bytes"},
	}
	for _, tc := range tests {
		_, err := readAll(strings.NewReader(tc.doc))
		var je *Error
		if err == nil || !errors.As(err, &je) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an *Error containing %q", tc.doc, err, tc.want)
		}
		// jsonstrict (the checker the old decoder ran) refuses every malformed document too.
		if strings.Contains(tc.want, "malformed") || strings.Contains(tc.want, "trailing") {
			if jsonstrict.Check([]byte(tc.doc), 16, "document") == nil && json.Valid([]byte(tc.doc)) {
				t.Errorf("%q: refused here, accepted by jsonstrict and encoding/json", tc.doc)
			}
		}
	}
}

// Typed reads name the value's path and what came instead; limits stop a string as soon as it is passed.
func TestTypedReads(t *testing.T) {
	read := func(doc string, leaf func(r *Reader) error) error {
		r := NewReader(strings.NewReader(doc), 512, 16)
		var walk func() error
		walk = func() error {
			switch k, _ := r.Peek(); k {
			case Object:
				return r.Object(func(string) error { return walk() })
			case Array:
				return r.Array(func(int) error { return walk() })
			}
			return leaf(r)
		}
		return walk()
	}
	number := func(r *Reader) error { _, err := r.Number(); return err }
	integer := func(r *Reader) error { _, err := r.Int(); return err }
	tests := []struct {
		doc  string
		leaf func(r *Reader) error
		want string
	}{
		{`{"n": "x"}`, number, "n: expected a number, got a string"},
		{`{"series": [{"values": [1, 2, "three"]}]}`, number, "series[0].values[2]: expected a number, got a string"},
		{`{"i": 1.5}`, integer, "i: expected an integer, got 1.5"},
		{`{"i": 1e3}`, integer, "i: expected an integer, got 1e3"},
		{`{"u": -1}`, func(r *Reader) error { _, err := r.Uint(); return err }, "u: expected a non-negative integer, got -1"},
		{`{"big": 99999999999999999999}`, integer, "big: the integer 99999999999999999999 is out of range"},
		{`{"s": "` + strings.Repeat("y", 5000) + `"}`, func(r *Reader) error { _, err := r.String(10); return err },
			"s: a string longer than 10 bytes"},
		{`{"b": null}`, func(r *Reader) error { _, err := r.Bool(); return err }, "b: expected a boolean, got null"},
		{`{"o": 1}`, func(r *Reader) error { return r.Object(func(string) error { return nil }) }, "o: expected an object, got a number"},
		{`[{"a": 1}, {"a": 2, "a": 3}]`, number, "[1].a: duplicate key"},
	}
	for _, tc := range tests {
		err := read(tc.doc, tc.leaf)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%.40s: got %v, want %q", tc.doc, err, tc.want)
		}
	}
}

// The reader's own error (a body limit, a deadline) comes back unchanged, not as a syntax error.
func TestSourceErrorPassesThrough(t *testing.T) {
	boom := errors.New("boom")
	src := io.MultiReader(strings.NewReader(`{"a": [1, 2, `), iotest.ErrReader(boom))
	_, err := readAll(src)
	if !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	// Also in the middle of a number.
	src = io.MultiReader(strings.NewReader(`[12`), iotest.ErrReader(boom))
	if _, err := readAll(src); !errors.Is(err, boom) {
		t.Fatalf("number: got %v", err)
	}
}

// A caller that stops early reads no further than the value that made it stop.
func TestStopsEarly(t *testing.T) {
	n := 0
	src := &countingReader{r: io.MultiReader(strings.NewReader(`[`), &endless{b: []byte("1,")})}
	r := NewReader(src, 4096, 16)
	err := r.Array(func(i int) error {
		if i == 1000 {
			return errors.New("too many")
		}
		_, err := r.Number()
		n++
		return err
	})
	if err == nil || err.Error() != "too many" || n != 1000 || src.n > 8192 {
		t.Fatalf("err %v after %d values, %d bytes read", err, n, src.n)
	}
}

// Many keys cost linear time (a map past a few keys), and a skipped object holds none of them.
func TestManyKeys(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("{")
	for i := 0; i < 200000; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k`)
		b.WriteString(strings.Repeat("x", i%7))
		b.WriteString(string(rune('a' + i%26)))
		b.WriteString(`_`)
		b.WriteString(strconv.Itoa(i))
		b.WriteString(`":1`)
	}
	b.WriteString("}")
	doc := b.Bytes()
	r := NewReader(bytes.NewReader(doc), 4096, 16)
	n := 0
	if err := r.Object(func(string) error { n++; return r.Skip(64) }); err != nil || n != 200000 {
		t.Fatal(n, err)
	}
	// The live heap near the end of the document, while Skip is still inside the object: no keys held.
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	src := &heapAtEnd{r: bytes.NewReader(doc), at: len(doc) - 4096}
	r = NewReader(src, 512, 16)
	if err := r.Skip(64); err != nil || r.End() != nil {
		t.Fatal(err)
	}
	if grew := int64(src.heap) - int64(before.HeapAlloc); src.heap == 0 || grew > 1<<20 {
		t.Fatalf("skipping an object of 200,000 keys held %d bytes (heap %d)", grew, src.heap)
	}
}

// heapAtEnd records the live heap (after a GC) when the reader passes byte at.
type heapAtEnd struct {
	r    io.Reader
	at   int
	off  int
	heap uint64
}

func (h *heapAtEnd) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	if h.off < h.at && h.off+n >= h.at {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		h.heap = ms.HeapAlloc
	}
	h.off += n
	return n, err
}

func TestNumbers(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want float64
	}{{"0", 0}, {"-0", math.Copysign(0, -1)}, {"3.4028235e38", 3.4028235e38}, {"1e-400", 0}, {"12345.678e-3", 12.345678}} {
		r := NewReader(strings.NewReader(tc.doc), 512, 4)
		v, err := r.Number()
		if err != nil || math.Float64bits(v) != math.Float64bits(tc.want) {
			t.Errorf("%s: %v %v", tc.doc, v, err)
		}
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

type endless struct{ b []byte }

func (e *endless) Read(p []byte) (int, error) {
	n := 0
	for n+len(e.b) <= len(p) {
		n += copy(p[n:], e.b)
	}
	return n, nil
}

// FuzzMatchesEncodingJSON: a document both this package and (jsonstrict + encoding/json) accept reads the same;
// one accepted by only one of them must be a duplicate key, depth or UTF-8 difference, never a crash.
func FuzzMatchesEncodingJSON(f *testing.F) {
	for _, d := range validDocs {
		f.Add([]byte(d))
	}
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Add([]byte(`[1,2,3]x`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, err := readAll(bytes.NewReader(doc))
		var want any
		stdErr := jsonstrict.Check(doc, 16, "document")
		if stdErr == nil {
			stdErr = json.Unmarshal(doc, &want)
		}
		if err == nil && stdErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: got %#v, encoding/json %#v", doc, got, want)
		}
		if err == nil && stdErr != nil && !strings.Contains(stdErr.Error(), "duplicate") {
			t.Fatalf("%q: accepted here, refused by jsonstrict/encoding/json: %v", doc, stdErr)
		}
	})
}
