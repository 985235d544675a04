package main

import (
	"io"
	"testing"
	"time"
)

// -idle-timeout closes a keep-alive connection that sends nothing more; -read-header-timeout one whose
// header does not end in time. Both clients read a clean EOF (no answer for the second: net/http's own).
func TestConnectionTimeouts(t *testing.T) {
	addr := serveDefault(t, options{maxConns: 8, idleTimeout: 300 * time.Millisecond, readHeaderTimeout: 300 * time.Millisecond})
	idle := dialHTTP(t, addr)
	defer idle.Close()
	if resp, _, err := idle.roundTrip(getReq("/livez")); err != nil || resp.StatusCode != 200 {
		t.Fatalf("livez: %v %v", err, resp)
	}
	slow := dialHTTP(t, addr)
	defer slow.Close()
	_, _ = io.WriteString(slow, "GET /livez HTTP/1.1\r\nHost: localhost\r\n")
	start := time.Now()
	for name, c := range map[string]*httpConn{"idle": idle, "slow header": slow} {
		if got := readState(c, 5*time.Second); got != "eof" {
			t.Errorf("%s connection reads %q, want eof", name, got)
		}
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("closed after %v, want about 300ms", took)
	}
}
