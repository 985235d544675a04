package settings

import (
	"errors"
	"flag"
	"strings"
	"testing"
	"time"
)

type opts struct {
	Count  int
	Bytes  int64
	Wait   time.Duration
	Mode   string
	Secret string
	Loud   bool
	Inner  inner
}

type inner struct{ Limit int }

var innerTable = []Setting[inner]{
	Int("limit", "T_LIMIT", 7, 1, "a limit", func(i *inner) *int { return &i.Limit }),
}

func table() []Setting[opts] {
	secret := String("secret", "T_SECRET", "", "a secret", nil, func(o *opts) *string { return &o.Secret })
	secret.Where = EnvOnly
	return append([]Setting[opts]{
		Int("count", "T_COUNT", 64, 1, "a count", func(o *opts) *int { return &o.Count }),
		Int("bytes", "T_BYTES", int64(8<<20), 0, "a size", func(o *opts) *int64 { return &o.Bytes }),
		Duration("wait", "T_WAIT", 2*time.Millisecond, 0, "a wait", func(o *opts) *time.Duration { return &o.Wait }),
		String("mode", "T_MODE", "eager", "a mode", OneOf("eager", "graph"), func(o *opts) *string { return &o.Mode }),
		secret,
		Bool("loud", "T_LOUD", false, "be loud", func(o *opts) *bool { return &o.Loud }),
	}, Lift(innerTable, func(o *opts) *inner { return &o.Inner })...)
}

func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestLoad(t *testing.T) {
	want := opts{Count: 64, Bytes: 8 << 20, Wait: 2 * time.Millisecond, Mode: "eager", Inner: inner{Limit: 7}}
	tests := []struct {
		name string
		args []string
		env  func(string) (string, bool)
		edit func(o *opts) // applied to want
		err  string        // substring of the error; "" for none
	}{
		{name: "defaults", env: env()},
		{name: "flags", args: []string{"-count", "3", "-bytes=0x10", "-wait", "1s", "-mode", "graph", "-limit", "9"}, env: env(),
			edit: func(o *opts) { o.Count, o.Bytes, o.Wait, o.Mode, o.Inner.Limit = 3, 16, time.Second, "graph", 9 }},
		{name: "environment", env: env("T_COUNT", "5", "T_WAIT", "0s", "T_SECRET", "k", "T_LIMIT", "2"),
			edit: func(o *opts) { o.Count, o.Wait, o.Secret, o.Inner.Limit = 5, 0, "k", 2 }},
		{name: "the flag wins", args: []string{"-count", "3"}, env: env("T_COUNT", "5"), edit: func(o *opts) { o.Count = 3 }},
		{name: "bad environment integer", env: env("T_COUNT", "lots"), err: `invalid value "lots" for T_COUNT: want an integer`},
		{name: "environment duration without a unit", env: env("T_WAIT", "5"), err: `invalid value "5" for T_WAIT: want a duration`},
		{name: "empty environment integer", env: env("T_COUNT", ""), err: `invalid value "" for T_COUNT`},
		{name: "below the minimum", env: env("T_COUNT", "0"), err: "must be >= 1"},
		{name: "every bad variable", env: env("T_COUNT", "x", "T_MODE", "turbo"), err: `for T_COUNT: want an integer` + "\n" +
			`invalid value "turbo" for T_MODE: want one of ["eager" "graph"]`},
		{name: "a bad environment value is reported even when a flag is given", args: []string{"-count", "3"},
			env: env("T_COUNT", "x"), err: "T_COUNT"},
		{name: "bad flag", args: []string{"-mode", "turbo"}, env: env(), err: `invalid value "turbo" for -mode: want one of`},
		{name: "flag of a lifted table", args: []string{"-limit", "-1"}, env: env(), err: `invalid value "-1" for -limit: must be >= 1`},
		{name: "environment-only setting has no flag", args: []string{"-secret", "k"}, env: env(), err: "not defined: -secret"},
		{name: "a bool flag takes no value", args: []string{"-loud", "-count", "3"}, env: env(),
			edit: func(o *opts) { o.Loud, o.Count = true, 3 }},
		{name: "a bool flag set false", args: []string{"-loud=false"}, env: env("T_LOUD", "true")},
		{name: "bool environment", env: env("T_LOUD", "1"), edit: func(o *opts) { o.Loud = true }},
		{name: "bad bool environment", env: env("T_LOUD", "yes please"), err: `invalid value "yes please" for T_LOUD: want true or false`},
		{name: "bad bool flag", args: []string{"-loud=maybe"}, env: env(), err: `invalid value "maybe" for -loud: want true or false`},
		{name: "positional argument", args: []string{"extra"}, env: env(), err: `unexpected argument ["extra"] (every option is a flag)`},
		{name: "positional arguments", args: []string{"-count", "3", "a", "-wait", "1s"}, env: env(),
			err: `unexpected arguments ["a" "-wait" "1s"]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got opts
			err := Load("prog", table(), &got, tc.args, tc.env)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				var se *Error
				if strings.Contains(tc.err, "invalid value") && (!errors.Is(err, ErrInvalid) || !errors.As(err, &se)) {
					t.Fatalf("%v: not an *Error matching ErrInvalid", err)
				}
				return
			}
			w := want
			if tc.edit != nil {
				tc.edit(&w)
			}
			if err != nil || got != w {
				t.Fatalf("got %+v, %v; want %+v", got, err, w)
			}
		})
	}
	for _, args := range [][]string{{"-h"}, {"-count", "3", "--help"}} {
		// Help is help even when the environment holds a bad value (it must not hide the list of options).
		for _, e := range []func(string) (string, bool){env(), env("T_COUNT", "lots")} {
			if err := Load("prog", table(), &opts{}, args, e); !errors.Is(err, flag.ErrHelp) {
				t.Fatalf("%q: %v", args, err)
			}
		}
	}
}

func TestComplete(t *testing.T) {
	o := opts{Count: 0, Bytes: 0, Wait: 0, Inner: inner{Limit: 3}}
	if err := Complete(table(), &o); err != nil || o.Count != 64 || o.Bytes != 0 || o.Wait != 0 || o.Inner.Limit != 3 {
		t.Fatalf("%+v %v: zero takes the default only where zero is refused", o, err)
	}
	o = opts{Count: -2, Wait: -time.Second}
	err := Complete(table(), &o)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `"-2" for count: must be >= 1`) ||
		!strings.Contains(err.Error(), `"-1s" for wait: must be >= 0s`) {
		t.Fatalf("%v", err)
	}
}

func TestUsage(t *testing.T) {
	var b strings.Builder
	tab := table()
	tab[3].Unset = "never shown: the default is set"
	tab[4].Unset = "no secret"
	Usage(&b, tab)
	for _, want := range []string{"-count, T_COUNT (default 64)\n    \ta count", "-wait, T_WAIT (default 2ms)",
		"-mode, T_MODE (default eager)", "T_SECRET, environment only (default no secret)", "-limit, T_LIMIT (default 7)"} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("usage lacks %q:\n%s", want, b.String())
		}
	}
}
