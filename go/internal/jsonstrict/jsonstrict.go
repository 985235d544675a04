// Package jsonstrict checks what encoding/json lets through: duplicate object keys (it keeps the last one
// silently), nesting deeper than a limit, and trailing data after the top-level value (a stray '}' or ']'
// included). The LoRA catalog parser and the server's request decoder run it before decoding.
package jsonstrict

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Check walks data's tokens and returns nil or an error whose message names the problem: "duplicate key
// \"k\"", "JSON nested deeper than N levels", "malformed JSON: ...", or "malformed JSON: trailing data after
// the <what>". what names the top-level value in messages (e.g. "request object").
func Check(data []byte, maxDepth int, what string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		object bool
		keys   map[string]struct{}
		key    bool // in an object: the next token is a key or '}'
	}
	var stack []*frame
	seen := false // a whole top-level value was consumed
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			if len(stack) != 0 || !seen {
				return errors.New("malformed JSON: unexpected end of document")
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("malformed JSON: %v", err)
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].key {
			if k, ok := tok.(string); ok {
				top := stack[n-1]
				if _, dup := top.keys[k]; dup {
					return fmt.Errorf("duplicate key %q", k)
				}
				top.keys[k] = struct{}{}
				top.key = false
				continue
			}
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				if len(stack) >= maxDepth {
					return fmt.Errorf("JSON nested deeper than %d levels", maxDepth)
				}
				stack = append(stack, &frame{object: d == '{', keys: map[string]struct{}{}, key: d == '{'})
				continue
			default: // '}' or ']'
				stack = stack[:len(stack)-1]
			}
		}
		if len(stack) == 0 { // a whole top-level value (a scalar or a closed container)
			if seen || dec.More() {
				return fmt.Errorf("malformed JSON: trailing data after the %s", what)
			}
			seen = true
			continue
		}
		if top := stack[len(stack)-1]; top.object {
			top.key = true
		}
	}
}
