// Package settings keeps a program's options in one table. Each Setting names its flag, its environment
// variable, its default and its help text, and parses and checks a value; Load fills a destination from the
// defaults, then the environment, then the command line (which wins), Usage writes the -h text, and Complete
// checks a destination a program filled in code (zero fields take their defaults).
//
// A value that does not parse is an error naming where it came from and what it was, from the command line
// and from the environment alike: nothing is replaced by a default behind the user's back.
package settings

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"time"
)

// ErrInvalid is matched (errors.Is) by every error about a value that does not parse or is out of range.
var ErrInvalid = errors.New("invalid value")

// Error is a value that does not parse, or is out of range, with where it came from.
type Error struct {
	Source string // "-max-batch", "CUTENATIVE_MAX_BATCH" or, for a value set in code, the setting's name
	Value  string
	Err    error // why
}

func (e *Error) Error() string {
	return fmt.Sprintf("invalid value %q for %s: %v", e.Value, e.Source, e.Err)
}

// Unwrap gives ErrInvalid and the reason.
func (e *Error) Unwrap() []error { return []error{ErrInvalid, e.Err} }

// PositionalError is the arguments left after the flags: the programs take none.
type PositionalError struct{ Args []string }

func (e *PositionalError) Error() string {
	what := "argument"
	if len(e.Args) > 1 {
		what = "arguments"
	}
	return fmt.Sprintf("unexpected %s %q (every option is a flag)", what, e.Args)
}

// Where says how a setting is given.
type Where int

const (
	FlagAndEnv Where = iota // a flag (-Name) and, when Env is set, an environment variable
	EnvOnly                 // only the environment variable (secrets stay off the command line)
	CodeOnly                // neither: only a default and a check (a field programs set in code)
)

// Setting is one option. T is the struct it fills.
type Setting[T any] struct {
	Name    string // the flag, without the dash; also the setting's name in messages
	Env     string // the environment variable; "" for none
	Where   Where
	Default string // the value when none is given, as text (parsed like any other value)
	Unset   string // what an empty Default means, for -h ("the embedded default model"); "" shows "none"
	Help    string
	Bool    bool // a flag that takes no value (-version; -version=false also works)
	// Parse parses and checks text and stores the value in dst.
	Parse func(dst *T, text string) error
	// Complete, when set, checks the value a program left in dst; a zero value takes the default where zero
	// is not a value the setting accepts. It returns an *Error naming the setting.
	Complete func(dst *T) error
}

// Integer is what Int parses.
type Integer interface{ ~int | ~int64 }

// Int is an integer setting of at least min; a zero left in code means the default when min > 0. Values take
// the flag package's syntax (decimal, 0x.., 1_000).
func Int[T any, N Integer](name, env string, def, min N, help string, field func(*T) *N) Setting[T] {
	parse := func(text string) (N, error) {
		n, err := strconv.ParseInt(text, 0, 64)
		if err != nil || int64(N(n)) != n {
			return 0, errors.New("want an integer")
		}
		return N(n), nil
	}
	return atLeast(name, env, def, min, help, field, parse, func(n N) string { return strconv.FormatInt(int64(n), 10) })
}

// Duration is a duration setting of at least min ("30s", "2ms": a number needs its unit); a zero left in code
// means the default when min > 0.
func Duration[T any](name, env string, def, min time.Duration, help string, field func(*T) *time.Duration) Setting[T] {
	parse := func(text string) (time.Duration, error) {
		d, err := time.ParseDuration(text)
		if err != nil {
			return 0, errors.New("want a duration with its unit, such as 30s, 2ms or 1m30s")
		}
		return d, nil
	}
	return atLeast(name, env, def, min, help, field, parse, time.Duration.String)
}

// atLeast is what Int and Duration share: a setting of a number of at least min that parse reads from text
// (its error says what the text should be) and format writes back (the default, and values in messages); a
// zero left in code means the default when min > 0.
func atLeast[T any, N Integer](name, env string, def, min N, help string, field func(*T) *N,
	parse func(string) (N, error), format func(N) string) Setting[T] {
	return Setting[T]{Name: name, Env: env, Default: format(def), Help: help,
		Parse: func(dst *T, text string) error {
			n, err := parse(text)
			if err != nil {
				return err
			}
			if n < min {
				return fmt.Errorf("must be >= %s", format(min))
			}
			*field(dst) = n
			return nil
		},
		Complete: func(dst *T) error {
			p := field(dst)
			switch {
			case *p == 0 && min > 0:
				*p = def
			case *p < min:
				return &Error{Source: name, Value: format(*p), Err: fmt.Errorf("must be >= %s", format(min))}
			}
			return nil
		}}
}

// String is a text setting; check (nil: any text) rejects values with a reason.
func String[T any](name, env, def, help string, check func(string) error, field func(*T) *string) Setting[T] {
	return Setting[T]{Name: name, Env: env, Default: def, Help: help,
		Parse: func(dst *T, text string) error {
			if check != nil {
				if err := check(text); err != nil {
					return err
				}
			}
			*field(dst) = text
			return nil
		}}
}

// Bool is a true/false setting; its flag needs no value ("-version" sets it).
func Bool[T any](name, env string, def bool, help string, field func(*T) *bool) Setting[T] {
	return Setting[T]{Name: name, Env: env, Default: strconv.FormatBool(def), Help: help, Bool: true,
		Parse: func(dst *T, text string) error {
			b, err := strconv.ParseBool(text)
			if err != nil {
				return errors.New("want true or false")
			}
			*field(dst) = b
			return nil
		}}
}

// OneOf is a String check accepting exactly the given values.
func OneOf(values ...string) func(string) error {
	return func(s string) error {
		for _, v := range values {
			if s == v {
				return nil
			}
		}
		return fmt.Errorf("want one of %q", values)
	}
}

// Lift makes a table for the struct that holds U at field: a program adds a library's settings to its own.
func Lift[T, U any](table []Setting[U], field func(*T) *U) []Setting[T] {
	out := make([]Setting[T], len(table))
	for i, s := range table {
		out[i] = Setting[T]{Name: s.Name, Env: s.Env, Where: s.Where, Default: s.Default, Unset: s.Unset, Help: s.Help,
			Bool: s.Bool, Parse: func(dst *T, text string) error { return s.Parse(field(dst), text) }}
		if s.Complete != nil {
			out[i].Complete = func(dst *T) error { return s.Complete(field(dst)) }
		}
	}
	return out
}

// Defaults stores every setting's default in dst. An error means the table itself is wrong.
func Defaults[T any](table []Setting[T], dst *T) error {
	for _, s := range table {
		if err := s.Parse(dst, s.Default); err != nil {
			return fmt.Errorf("settings: the default of %s: %w", s.Name, &Error{Source: s.Name, Value: s.Default, Err: err})
		}
	}
	return nil
}

// Complete checks the values a program put in dst (zero values take their defaults where zero is not
// accepted): every *Error found, joined.
func Complete[T any](table []Setting[T], dst *T) error {
	var errs []error
	for _, s := range table {
		if s.Complete != nil {
			if err := s.Complete(dst); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Load fills dst from the defaults, then the environment (lookup, normally os.LookupEnv), then args (flags
// win). Every environment variable that does not parse is reported (joined *Errors), then the first flag
// that does not; -h or -help give flag.ErrHelp; positional arguments are an error.
func Load[T any](program string, table []Setting[T], dst *T, args []string, lookup func(string) (string, bool)) error {
	return LoadWithFile(program, table, dst, args, lookup, nil)
}

// LoadWithFile is Load with a configuration file's values between the defaults and the environment: defaults,
// then file, then environment, then flags.
func LoadWithFile[T any](program string, table []Setting[T], dst *T, args []string, lookup func(string) (string, bool), file *File) error {
	if err := Defaults(table, dst); err != nil {
		return err
	}
	if file != nil {
		var errs []error
		for _, s := range table {
			if v, ok := file.Values[s.Name]; ok && s.Where != CodeOnly {
				if err := s.Parse(dst, v); err != nil {
					errs = append(errs, &Error{Source: file.Path + ": " + s.Name, Value: v, Err: err})
				}
			}
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
	}
	for _, a := range args { // help first: a bad environment variable must not hide it
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--h" || a == "--help" {
			return flag.ErrHelp
		}
	}
	var errs []error
	for _, s := range table {
		if s.Env == "" || s.Where == CodeOnly {
			continue
		}
		if v, ok := lookup(s.Env); ok {
			if err := s.Parse(dst, v); err != nil {
				errs = append(errs, &Error{Source: s.Env, Value: v, Err: err})
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	fs := flag.NewFlagSet(program, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the caller reports errors and writes Usage
	var bad *Error
	for _, s := range table {
		if s.Where != FlagAndEnv {
			continue
		}
		set := func(v string) error {
			if err := s.Parse(dst, v); err != nil {
				bad = &Error{Source: "-" + s.Name, Value: v, Err: err}
				return err
			}
			return nil
		}
		if s.Bool {
			fs.BoolFunc(s.Name, s.Help, set)
		} else {
			fs.Func(s.Name, s.Help, set)
		}
	}
	if err := fs.Parse(args); err != nil {
		if bad != nil {
			return bad
		}
		return err
	}
	if fs.NArg() > 0 {
		return &PositionalError{Args: fs.Args()}
	}
	return nil
}

// Usage writes every setting a user can give, in table order: its flag, its environment variable, its
// default and its help.
func Usage[T any](w io.Writer, table []Setting[T]) {
	for _, s := range table {
		if s.Where == CodeOnly {
			continue
		}
		def := s.Default
		if def == "" {
			def = s.Unset
		}
		if def == "" {
			def = "none"
		}
		head := "-" + s.Name
		switch {
		case s.Where == EnvOnly:
			head = s.Env + ", environment only"
		case s.Env != "":
			head += ", " + s.Env
		}
		fmt.Fprintf(w, "  %s (default %s)\n    \t%s\n", head, def, s.Help)
	}
}

// File is a configuration file's settings: values by setting name, as text.
type File struct {
	Path   string
	Values map[string]string
}

// ReadFile reads a JSON object whose keys are setting names (the flags' names, without the dash) and whose
// values are strings, numbers or booleans ("30s" for a duration), refusing keys the table does not have, but for
// the extra keys, whose raw values are returned for the program to read (a list of models, say).
func ReadFile[T any](path string, table []Setting[T], extra ...string) (*File, map[string]json.RawMessage, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	known := map[string]bool{}
	for _, s := range table {
		if s.Where != CodeOnly {
			known[s.Name] = true
		}
	}
	f := &File{Path: path, Values: map[string]string{}}
	rest := map[string]json.RawMessage{}
	for k, v := range raw {
		if slices.Contains(extra, k) {
			rest[k] = v
			continue
		}
		if !known[k] {
			return nil, nil, fmt.Errorf("%s: unknown setting %q", path, k)
		}
		var val any
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber()
		if err := d.Decode(&val); err != nil {
			return nil, nil, fmt.Errorf("%s: %s: %w", path, k, err)
		}
		switch x := val.(type) {
		case string:
			f.Values[k] = x
		case json.Number:
			f.Values[k] = x.String()
		case bool:
			f.Values[k] = strconv.FormatBool(x)
		default:
			return nil, nil, fmt.Errorf("%s: %s: want a string, a number or a boolean", path, k)
		}
	}
	return f, rest, nil
}
