package main

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// Through run(), with and without -max-conns: the requests net/http refuses before any handler runs are
// answered with the server's JSON error object, and the connection is closed.
func TestGoErrorsAreJSONThroughRun(t *testing.T) {
	bigHeader := "GET /livez HTTP/1.1\r\nHost: localhost\r\nX-Big: " + strings.Repeat("a", 100<<10) + "\r\n\r\n"
	cases := []struct {
		name, raw     string
		status        int
		code, message string
	}{
		{"100 KB header", bigHeader, 431, "header_too_large", "the request's header is larger than the server accepts (64 KiB)"},
		{"malformed request line", "GARBAGE\r\n\r\n", 400, "bad_request", ""},
		{"HTTP/1.1 without Host", "GET /livez HTTP/1.1\r\n\r\n", 400, "bad_request", "missing required Host header"},
		{"unknown transfer coding", "POST /v1/forecast HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\n\r\n", 501,
			"not_implemented", ""},
		{"HTTP/3.0", "GET /livez HTTP/3.0\r\nHost: localhost\r\n\r\n", 505, "http_version_not_supported", "unsupported protocol version"},
	}
	for _, maxConns := range []int{0, 4} {
		t.Run(fmt.Sprintf("max-conns %d", maxConns), func(t *testing.T) {
			addr := serveDefault(t, options{maxConns: maxConns})
			for _, tc := range cases {
				c := dialHTTP(t, addr)
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				go io.WriteString(c, tc.raw) // net/http answers 431 before it has read the whole header
				t.Log(tc.name)
				checkJSONError(t, c.r, tc.status, tc.code, tc.message)
				if got := readState(c, 5*time.Second); got != "eof" {
					t.Fatalf("%s: after the answer the connection reads %q, want eof", tc.name, got)
				}
				c.Close()
			}
			// A good request on the same server still gets the server's own answer.
			c := dialHTTP(t, addr)
			defer c.Close()
			if resp, body, err := c.roundTrip(getReq("/livez")); err != nil || resp.StatusCode != 200 {
				t.Fatalf("livez: %v %v %s", err, resp, body)
			}
		})
	}
}
