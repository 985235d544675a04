// Package jsonstream reads one JSON document from a stream in a single pass, the way a request decoder needs
// it: the caller walks the document it expects (an object's fields by key, an array's elements by index) and
// takes each value as it arrives, so nothing is held but what the caller keeps, and the caller can stop at the
// first value past one of its limits without reading the rest.
//
// It is strict where encoding/json is lenient: a duplicate key, a document nested deeper than a limit, trailing
// data after the document, invalid UTF-8 and control characters in strings are errors. Keys are compared byte
// for byte (encoding/json matches struct fields case-insensitively). A lone UTF-16 surrogate in a \u escape
// becomes U+FFFD, as in encoding/json.
//
// Errors about the document are *Error, naming the value's path ("series[3].values[17]") and the byte offset;
// an error from the underlying reader (a body limit, a read deadline) is returned as it is, so errors.As finds
// it.
package jsonstream

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Kind is the kind of the next value.
type Kind int

const (
	Invalid Kind = iota
	Object
	Array
	String
	Number
	Bool
	Null
)

var kindNames = [...]string{"invalid", "an object", "an array", "a string", "a number", "a boolean", "null"}

func (k Kind) String() string { return kindNames[k] }

// Error is a document that is not what the caller expects: malformed JSON, or a value the caller refused
// (Reader.Errorf).
type Error struct {
	Path   string // "" for the document itself
	Offset int64  // bytes read before the value, or where the syntax broke
	Msg    string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// MaxNumberBytes bounds a number literal (a longer one is an error; 1e308 needs 5).
const MaxNumberBytes = 64

// maxKeyBytes bounds an object key: every schema this package serves has short keys.
const maxKeyBytes = 256

type pathElem struct {
	key   string
	index int // -1: key
}

// Reader reads one document. Not safe for concurrent use.
type Reader struct {
	src      io.Reader
	buf      []byte
	pos, end int
	base     int64 // offset of buf[0] in the stream
	err      error // the source's error, once it returned one (io.EOF included)
	maxDepth int
	path     []pathElem
	scratch  []byte
}

// NewReader reads from src with a buffer of bufSize bytes (at least 512), refusing documents nested deeper than
// maxDepth containers.
func NewReader(src io.Reader, bufSize, maxDepth int) *Reader {
	if bufSize < 512 {
		bufSize = 512
	}
	return &Reader{src: src, buf: make([]byte, bufSize), maxDepth: maxDepth}
}

// Offset is the number of bytes consumed.
func (r *Reader) Offset() int64 { return r.base + int64(r.pos) }

// Path is the path of the value being read: "" at the top, "series[3].values".
func (r *Reader) Path() string {
	var b strings.Builder
	for _, p := range r.path {
		if p.index >= 0 {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(p.index))
			b.WriteByte(']')
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p.key)
	}
	return b.String()
}

// Errorf returns an *Error at the current path (for a value the caller refuses).
func (r *Reader) Errorf(format string, args ...any) error {
	return &Error{Path: r.Path(), Offset: r.Offset(), Msg: fmt.Sprintf(format, args...)}
}

// fill makes at least one unread byte available; false at the end of the stream or on a read error (r.err).
func (r *Reader) fill() bool {
	if r.pos < r.end {
		return true
	}
	if r.err != nil {
		return false
	}
	r.base += int64(r.end)
	r.pos, r.end = 0, 0
	for r.end == 0 {
		n, err := r.src.Read(r.buf)
		r.end = n
		if err != nil {
			r.err = err
			return n > 0
		}
		if n == 0 {
			continue // a reader may return 0, nil; io.Reader says to try again
		}
	}
	return true
}

// ioError is the error for a stream that ended or failed where a byte was needed.
func (r *Reader) ioError() error {
	if r.err == nil || r.err == io.EOF {
		return &Error{Path: r.Path(), Offset: r.Offset(), Msg: "malformed JSON: unexpected end of document"}
	}
	return r.err
}

func (r *Reader) syntax(format string, args ...any) error {
	return &Error{Path: r.Path(), Offset: r.Offset(), Msg: "malformed JSON: " + fmt.Sprintf(format, args...)}
}

// peekByte skips whitespace and returns the next byte without consuming it.
func (r *Reader) peekByte() (byte, error) {
	for {
		if !r.fill() {
			return 0, r.ioError()
		}
		for r.pos < r.end {
			switch c := r.buf[r.pos]; c {
			case ' ', '\t', '\n', '\r':
				r.pos++
			default:
				return c, nil
			}
		}
	}
}

// Peek returns the kind of the next value without consuming it.
func (r *Reader) Peek() (Kind, error) {
	c, err := r.peekByte()
	if err != nil {
		return Invalid, err
	}
	switch {
	case c == '{':
		return Object, nil
	case c == '[':
		return Array, nil
	case c == '"':
		return String, nil
	case c == '-' || (c >= '0' && c <= '9'):
		return Number, nil
	case c == 't' || c == 'f':
		return Bool, nil
	case c == 'n':
		return Null, nil
	}
	return Invalid, r.syntax("unexpected character %q", rune(c))
}

// expect reads a value of kind k's first byte, or returns an error naming what came instead.
func (r *Reader) expect(k Kind, what string) error {
	got, err := r.Peek()
	if err != nil {
		return err
	}
	if got != k {
		return r.Errorf("expected %s, got %s", what, got)
	}
	return nil
}

// Object reads an object, calling field for each key in document order; field must consume the key's value
// (through this Reader). A repeated key is an error.
func (r *Reader) Object(field func(key string) error) error { return r.object(field, true) }

// object reads an object; with unique, a repeated key is an error (its keys are held until the object ends).
func (r *Reader) object(field func(key string) error, unique bool) error {
	if err := r.expect(Object, "an object"); err != nil {
		return err
	}
	if len(r.path) >= r.maxDepth {
		return r.Errorf("JSON nested deeper than %d levels", r.maxDepth)
	}
	r.pos++ // '{'
	var seen keySet
	r.path = append(r.path, pathElem{index: -1})
	defer func() { r.path = r.path[:len(r.path)-1] }()
	for first := true; ; first = false {
		c, err := r.peekByte()
		if err != nil {
			return err
		}
		if c == '}' && first {
			r.pos++
			return nil
		}
		if c != '"' {
			return r.syntax("expected a string key, got %q", rune(c))
		}
		key, err := r.str(maxKeyBytes, "key")
		if err != nil {
			return err
		}
		if unique && seen.add(key) {
			r.path[len(r.path)-1].key = key
			return r.Errorf("duplicate key")
		}
		if c, err = r.peekByte(); err != nil {
			return err
		} else if c != ':' {
			return r.syntax("expected ':' after a key, got %q", rune(c))
		}
		r.pos++
		r.path[len(r.path)-1].key = key
		if err := field(key); err != nil {
			return err
		}
		if c, err = r.peekByte(); err != nil {
			return err
		}
		r.pos++
		switch c {
		case ',':
		case '}':
			return nil
		default:
			r.pos--
			return r.syntax("expected ',' or '}' in an object, got %q", rune(c))
		}
	}
}

// Array reads an array, calling elem for each element with its index; elem must consume the element.
func (r *Reader) Array(elem func(i int) error) error {
	if err := r.expect(Array, "an array"); err != nil {
		return err
	}
	if len(r.path) >= r.maxDepth {
		return r.Errorf("JSON nested deeper than %d levels", r.maxDepth)
	}
	r.pos++ // '['
	r.path = append(r.path, pathElem{})
	defer func() { r.path = r.path[:len(r.path)-1] }()
	for i := 0; ; i++ {
		c, err := r.peekByte()
		if err != nil {
			return err
		}
		if c == ']' && i == 0 {
			r.pos++
			return nil
		}
		r.path[len(r.path)-1].index = i
		if err := elem(i); err != nil {
			return err
		}
		if c, err = r.peekByte(); err != nil {
			return err
		}
		r.pos++
		switch c {
		case ',':
		case ']':
			return nil
		default:
			r.pos--
			return r.syntax("expected ',' or ']' in an array, got %q", rune(c))
		}
	}
}

// Null consumes a null and reports true, or reports false and consumes nothing.
func (r *Reader) Null() (bool, error) {
	k, err := r.Peek()
	if err != nil || k != Null {
		return false, err
	}
	return true, r.literal("null")
}

func (r *Reader) literal(word string) error {
	for i := 0; i < len(word); i++ {
		if !r.fill() {
			return r.ioError()
		}
		if r.buf[r.pos] != word[i] {
			return r.syntax("invalid literal (want %s)", word)
		}
		r.pos++
	}
	return r.delimited()
}

// delimited checks that a number or literal is not followed by a character that would continue it.
func (r *Reader) delimited() error {
	if !r.fill() {
		if r.err != nil && r.err != io.EOF {
			return r.err
		}
		return nil
	}
	switch c := r.buf[r.pos]; c {
	case ' ', '\t', '\n', '\r', ',', ']', '}':
		return nil
	default:
		return r.syntax("unexpected character %q after a value", rune(c))
	}
}

// Bool reads true or false.
func (r *Reader) Bool() (bool, error) {
	if err := r.expect(Bool, "a boolean"); err != nil {
		return false, err
	}
	if r.buf[r.pos] == 't' {
		return true, r.literal("true")
	}
	return false, r.literal("false")
}

// numberText reads a number literal into r.scratch, checking JSON's grammar.
func (r *Reader) numberText() ([]byte, error) {
	if err := r.expect(Number, "a number"); err != nil {
		return nil, err
	}
	r.scratch = r.scratch[:0]
	for {
		if !r.fill() {
			if r.err != nil && r.err != io.EOF {
				return nil, r.err
			}
			break
		}
		c := r.buf[r.pos]
		if !(c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E') {
			break
		}
		if len(r.scratch) == MaxNumberBytes {
			return nil, r.Errorf("a number literal longer than %d bytes", MaxNumberBytes)
		}
		r.scratch = append(r.scratch, c)
		r.pos++
	}
	if !validNumber(r.scratch) {
		return nil, r.syntax("invalid number %q", r.scratch)
	}
	return r.scratch, r.delimited()
}

// validNumber checks JSON's number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func validNumber(s []byte) bool {
	i := 0
	digits := func() int {
		n := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}

// Number reads a number as a float64; a literal beyond float64's range is an error.
func (r *Reader) Number() (float64, error) {
	text, err := r.numberText()
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseFloat(string(text), 64)
	if err != nil {
		return 0, r.Errorf("the number %s is out of range", text)
	}
	return v, nil
}

// Int reads an integer literal (digits, an optional minus; no fraction or exponent) that fits in an int64.
func (r *Reader) Int() (int64, error) {
	text, err := r.numberText()
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(string(text), 10, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
			return 0, r.Errorf("the integer %s is out of range", text)
		}
		return 0, r.Errorf("expected an integer, got %s", text)
	}
	return v, nil
}

// Uint reads a non-negative integer literal that fits in a uint64.
func (r *Reader) Uint() (uint64, error) {
	text, err := r.numberText()
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(string(text), 10, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
			return 0, r.Errorf("the integer %s is out of range", text)
		}
		return 0, r.Errorf("expected a non-negative integer, got %s", text)
	}
	return v, nil
}

// String reads a string of at most maxBytes bytes (UTF-8, after unescaping); a longer one is an error found
// as soon as the limit is passed.
func (r *Reader) String(maxBytes int) (string, error) {
	if err := r.expect(String, "a string"); err != nil {
		return "", err
	}
	return r.str(maxBytes, "string")
}

// str reads a string whose opening quote is next.
func (r *Reader) str(maxBytes int, what string) (string, error) {
	r.pos++ // '"'
	r.scratch = r.scratch[:0]
	for {
		if !r.fill() {
			return "", r.ioError()
		}
		// The run of plain bytes up to a quote, a backslash or a control character.
		start := r.pos
		for r.pos < r.end {
			c := r.buf[r.pos]
			if c == '"' || c == '\\' || c < 0x20 {
				break
			}
			r.pos++
		}
		r.scratch = append(r.scratch, r.buf[start:r.pos]...)
		if len(r.scratch) > maxBytes {
			return "", r.Errorf("a %s longer than %d bytes", what, maxBytes)
		}
		if r.pos == r.end {
			continue
		}
		switch c := r.buf[r.pos]; {
		case c == '"':
			r.pos++
			if !utf8.Valid(r.scratch) {
				return "", r.Errorf("a %s that is not valid UTF-8", what)
			}
			return string(r.scratch), nil
		case c < 0x20:
			return "", r.syntax("a control character (%#x) in a string", c)
		}
		r.pos++ // '\\'
		if err := r.escape(); err != nil {
			return "", err
		}
		if len(r.scratch) > maxBytes {
			return "", r.Errorf("a %s longer than %d bytes", what, maxBytes)
		}
	}
}

// escape decodes the escape after a backslash into r.scratch.
func (r *Reader) escape() error {
	if !r.fill() {
		return r.ioError()
	}
	c := r.buf[r.pos]
	r.pos++
	switch c {
	case '"', '\\', '/':
		r.scratch = append(r.scratch, c)
	case 'b':
		r.scratch = append(r.scratch, '\b')
	case 'f':
		r.scratch = append(r.scratch, '\f')
	case 'n':
		r.scratch = append(r.scratch, '\n')
	case 'r':
		r.scratch = append(r.scratch, '\r')
	case 't':
		r.scratch = append(r.scratch, '\t')
	case 'u':
		u, err := r.hex4()
		if err != nil {
			return err
		}
		ch := rune(u)
		if utf16.IsSurrogate(ch) {
			// A high surrogate followed by a low one as \uXXXX is one character; any other surrogate is U+FFFD.
			if ch >= 0xdc00 || !r.fill() || r.buf[r.pos] != '\\' {
				ch = utf8.RuneError
			} else {
				r.pos++ // '\\'
				if !r.fill() {
					return r.ioError()
				}
				if r.buf[r.pos] != 'u' {
					r.scratch = utf8.AppendRune(r.scratch, utf8.RuneError)
					return r.escape() // the next escape stands on its own
				}
				r.pos++ // 'u'
				u2, err := r.hex4()
				if err != nil {
					return err
				}
				if dec := utf16.DecodeRune(ch, rune(u2)); dec != utf8.RuneError {
					ch = dec
				} else {
					r.scratch = utf8.AppendRune(r.scratch, utf8.RuneError)
					if ch = rune(u2); utf16.IsSurrogate(ch) {
						ch = utf8.RuneError
					}
				}
			}
		}
		r.scratch = utf8.AppendRune(r.scratch, ch)
	default:
		return r.syntax("invalid escape %q in a string", "\\"+string(rune(c)))
	}
	return nil
}

func (r *Reader) hex4() (uint16, error) {
	var v uint16
	for i := 0; i < 4; i++ {
		if !r.fill() {
			return 0, r.ioError()
		}
		c := r.buf[r.pos]
		r.pos++
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, r.syntax("invalid \\u escape in a string")
		}
		v = v<<4 | uint16(c)
	}
	return v, nil
}

// Skip consumes the next value whatever it is (nesting still bounded, strings bounded by maxBytes each), holding
// nothing of it: the keys of a skipped object are not checked for repeats.
func (r *Reader) Skip(maxBytes int) error {
	k, err := r.Peek()
	if err != nil {
		return err
	}
	switch k {
	case Object:
		return r.object(func(string) error { return r.Skip(maxBytes) }, false)
	case Array:
		return r.Array(func(int) error { return r.Skip(maxBytes) })
	case String:
		_, err := r.String(maxBytes)
		return err
	case Number:
		_, err := r.numberText()
		return err
	case Bool:
		_, err := r.Bool()
		return err
	default:
		_, err := r.Null()
		return err
	}
}

// End checks that only whitespace follows the document.
func (r *Reader) End() error {
	for {
		if !r.fill() {
			if r.err != nil && r.err != io.EOF {
				return r.err
			}
			return nil
		}
		for r.pos < r.end {
			switch r.buf[r.pos] {
			case ' ', '\t', '\n', '\r':
				r.pos++
			default:
				return r.syntax("trailing data after the document")
			}
		}
	}
}

// keySet holds an object's keys: a slice while they are few (request schemas have a handful), a map beyond, so
// that an object of many keys (one being skipped) costs linear time.
type keySet struct {
	few  []string
	many map[string]struct{}
}

// add adds key and reports whether it was there already.
func (s *keySet) add(key string) bool {
	if s.many != nil {
		if _, ok := s.many[key]; ok {
			return true
		}
		s.many[key] = struct{}{}
		return false
	}
	for _, k := range s.few {
		if k == key {
			return true
		}
	}
	s.few = append(s.few, key)
	if len(s.few) > 16 {
		s.many = make(map[string]struct{}, 64)
		for _, k := range s.few {
			s.many[k] = struct{}{}
		}
		s.few = nil
	}
	return false
}
