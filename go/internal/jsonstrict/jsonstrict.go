// Package jsonstrict checks what encoding/json lets through: duplicate object keys (it keeps the last one
// silently, and matches struct fields case-insensitively, so "horizon" and "Horizon" are the same key),
// nesting deeper than a limit, and trailing data after the top-level value (a stray '}' or ']' included).
// The LoRA catalog parser and the server's request decoder run it before decoding. One pass over the bytes,
// no allocation but for the keys of each object; the full grammar is left to encoding/json, which decodes
// afterwards (a number or literal that is not JSON fails there).
package jsonstrict

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Check returns nil or an error whose message names the problem: "duplicate key \"k\"", "JSON nested deeper
// than N levels", "malformed JSON: ...", or "malformed JSON: trailing data after the <what>". what names the
// top-level value in messages (e.g. "request object").
func Check(data []byte, maxDepth int, what string) error {
	s := scanner{data: data, maxDepth: maxDepth}
	s.space()
	if s.i == len(s.data) {
		return fmt.Errorf("malformed JSON: unexpected end of document")
	}
	if err := s.value(0); err != nil {
		return err
	}
	s.space()
	if s.i < len(s.data) {
		return fmt.Errorf("malformed JSON: trailing data after the %s", what)
	}
	return nil
}

type scanner struct {
	data     []byte
	i        int
	maxDepth int
}

func (s *scanner) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) errorf(format string, args ...any) error {
	if s.i >= len(s.data) {
		return fmt.Errorf("malformed JSON: unexpected end of document")
	}
	return fmt.Errorf("malformed JSON: "+format+" at offset %d", append(args, s.i)...)
}

// value consumes one value at nesting depth (the number of containers around it).
func (s *scanner) value(depth int) error {
	if s.i >= len(s.data) {
		return s.errorf("")
	}
	switch c := s.data[s.i]; c {
	case '{', '[':
		if depth >= s.maxDepth {
			return fmt.Errorf("JSON nested deeper than %d levels", s.maxDepth)
		}
		s.i++
		if c == '{' {
			return s.object(depth + 1)
		}
		return s.array(depth + 1)
	case '"':
		_, err := s.str(false)
		return err
	default:
		// A number or a literal: its run of characters; encoding/json checks its grammar.
		start := s.i
		for s.i < len(s.data) {
			b := s.data[s.i]
			if b == ',' || b == '}' || b == ']' || b == ':' || b == '"' || b == '{' || b == '[' || b == ' ' ||
				b == '\t' || b == '\n' || b == '\r' {
				break
			}
			s.i++
		}
		if s.i == start {
			return s.errorf("invalid character %q", s.data[s.i])
		}
		return nil
	}
}

func (s *scanner) object(depth int) error {
	s.space()
	if s.i < len(s.data) && s.data[s.i] == '}' {
		s.i++
		return nil
	}
	var keys []string // objects are small: a slice beats a map
	for {
		s.space()
		if s.i >= len(s.data) || s.data[s.i] != '"' {
			return s.errorf("expected a key")
		}
		k, err := s.str(true)
		if err != nil {
			return err
		}
		lk := fold(k)
		for _, seen := range keys {
			if seen == lk {
				return fmt.Errorf("duplicate key %q", k)
			}
		}
		keys = append(keys, lk)
		s.space()
		if s.i >= len(s.data) || s.data[s.i] != ':' {
			return s.errorf("expected ':'")
		}
		s.i++
		if done, err := s.member(depth, '}', "an object value"); done || err != nil {
			return err
		}
	}
}

func (s *scanner) array(depth int) error {
	s.space()
	if s.i < len(s.data) && s.data[s.i] == ']' {
		s.i++
		return nil
	}
	for {
		if done, err := s.member(depth, ']', "an array element"); done || err != nil {
			return err
		}
	}
}

// member consumes a container's next value and what follows it: ',' (more to come) or the closing byte
// (done).
func (s *scanner) member(depth int, closing byte, what string) (done bool, err error) {
	s.space()
	if err := s.value(depth); err != nil {
		return false, err
	}
	s.space()
	if s.i >= len(s.data) {
		return false, s.errorf("")
	}
	switch s.data[s.i] {
	case ',':
		s.i++
		return false, nil
	case closing:
		s.i++
		return true, nil
	default:
		return false, s.errorf("invalid character %q after %s", s.data[s.i], what)
	}
}

// fold maps a key to what encoding/json compares when it matches struct fields: ASCII upper case, and every
// other rune to the smallest rune of its simple-fold orbit (so "ſeries" and "series" are the same key).
func fold(k string) string {
	var b strings.Builder
	b.Grow(len(k))
	for _, r := range k {
		if r < utf8.RuneSelf {
			if 'a' <= r && r <= 'z' {
				r -= 'a' - 'A'
			}
			b.WriteRune(r)
			continue
		}
		for {
			r2 := unicode.SimpleFold(r)
			if r2 <= r {
				r = r2
				break
			}
			r = r2
		}
		b.WriteRune(r)
	}
	return b.String()
}

// str consumes a string (s.data[s.i] == '"'); with decode, it returns its value (escapes resolved as
// encoding/json resolves them, so keys compare as the decoder sees them).
func (s *scanner) str(decode bool) (string, error) {
	start := s.i
	s.i++
	escaped := false
	for s.i < len(s.data) {
		switch b := s.data[s.i]; {
		case b == '\\':
			escaped = true
			s.i += 2
		case b == '"':
			s.i++
			if !decode {
				return "", nil
			}
			raw := s.data[start:s.i]
			if !escaped {
				return string(raw[1 : len(raw)-1]), nil
			}
			var v string
			if err := json.Unmarshal(raw, &v); err != nil {
				return "", fmt.Errorf("malformed JSON: %v", err)
			}
			return v, nil
		case b < 0x20:
			return "", s.errorf("control character in a string")
		default:
			s.i++
		}
	}
	return "", s.errorf("")
}
