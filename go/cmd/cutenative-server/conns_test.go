package main

import (
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// dialN opens n loopback connections to dl, closed with the test.
func dialN(t *testing.T, dl *drainListener, n int) []net.Conn {
	t.Helper()
	cs := make([]net.Conn, n)
	for i := range cs {
		c, err := net.Dial("tcp", dl.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cs[i] = c
	}
	return cs
}

// acceptAsync runs one Accept in the background.
func acceptAsync(dl *drainListener) <-chan net.Conn {
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := dl.Accept()
		if err != nil {
			c = nil
		}
		ch <- c
	}()
	return ch
}

// mustAccept takes a connection from dl, failing the test after 5 s.
func mustAccept(t *testing.T, ch <-chan net.Conn) net.Conn {
	t.Helper()
	select {
	case c := <-ch:
		if c == nil {
			t.Fatal("accept failed")
		}
		t.Cleanup(func() { c.Close() })
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no connection taken within 5 s")
	}
	return nil
}

// readState is what a client sees on its connection: "eof" (closed cleanly), "open" (nothing to read
// within wait) or what else came.
func readState(c net.Conn, wait time.Duration) string {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	defer c.SetReadDeadline(time.Time{})
	var b [1]byte
	n, err := c.Read(b[:])
	var ne net.Error
	switch {
	case n == 0 && errors.Is(err, io.EOF):
		return "eof"
	case n == 0 && errors.As(err, &ne) && ne.Timeout():
		return "open"
	case n > 0:
		return "data " + string(b[:n])
	}
	return err.Error()
}

// With every slot taken, a new connection closes the one idle the longest (its client reads EOF); the slot
// it frees is given back once, however often the evicted connection is closed afterwards.
func TestNewConnectionEvictsLongestIdle(t *testing.T) {
	dl := testListener(t, 2)
	clients := dialN(t, dl, 2)
	x, y := mustAccept(t, acceptAsync(dl)), mustAccept(t, acceptAsync(dl))
	dl.connState(x, http.StateActive) // both served a request, x went idle first
	dl.connState(y, http.StateActive)
	dl.connState(x, http.StateIdle)
	dl.connState(y, http.StateIdle)
	dialN(t, dl, 1)
	z := mustAccept(t, acceptAsync(dl))
	if got := readState(clients[0], 2*time.Second); got != "eof" {
		t.Fatalf("the longest-idle client reads %q, want eof", got)
	}
	if got := readState(clients[1], 50*time.Millisecond); got != "open" {
		t.Fatalf("the other idle client reads %q, want open", got)
	}
	if idle, unread := dl.Evictions(); idle != 1 || unread != 0 {
		t.Fatalf("evictions idle %d unread %d, want 1 0", idle, unread)
	}
	x.Close() // as net/http does once its read fails
	dl.connState(x, http.StateClosed)
	if n := len(dl.slots); n != 2 {
		t.Fatalf("%d slots held, want 2 (y and z)", n)
	}
	z.Close()
	if n := len(dl.slots); n != 1 {
		t.Fatalf("%d slots held after z closed, want 1", n)
	}
}

// A connection with a request in progress is never evicted: not when net/http reports it active, not while
// its header is still arriving (bytes read, no hook yet), not once it is hijacked. The new connection waits
// (past evictUnreadAfter) and takes the slot the moment the connection goes idle.
func TestRequestInProgressIsNeverEvicted(t *testing.T) {
	for _, tc := range []struct {
		name string
		busy func(dl *drainListener, server, client net.Conn)
	}{
		{"active", func(dl *drainListener, s, _ net.Conn) { dl.connState(s, http.StateActive) }},
		{"header arriving", func(_ *drainListener, s, c net.Conn) {
			_, _ = io.WriteString(c, "GET /livez HTTP/1.1\r\n")
			var b [8]byte
			_, _ = s.Read(b[:])
		}},
		{"hijacked", func(dl *drainListener, s, _ net.Conn) { dl.connState(s, http.StateHijacked) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each waits past evictUnreadAfter
			dl := testListener(t, 1)
			client := dialN(t, dl, 1)[0]
			x := mustAccept(t, acceptAsync(dl))
			tc.busy(dl, x, client)
			dialN(t, dl, 1)
			next := acceptAsync(dl)
			select {
			case <-next:
				t.Fatal("a connection with a request in progress was evicted")
			case <-time.After(evictUnreadAfter + 300*time.Millisecond):
			}
			if tc.name == "hijacked" {
				x.Close() // a hijacked connection holds its slot until its handler closes it
			} else {
				dl.connState(x, http.StateIdle)
			}
			mustAccept(t, next)
			want := uint64(1)
			if tc.name == "hijacked" {
				want = 0
			}
			if idle, unread := dl.Evictions(); idle != want || unread != 0 {
				t.Fatalf("evictions idle %d unread %d, want %d 0", idle, unread, want)
			}
		})
	}
}

// A connection that has sent nothing is evicted once it has been open evictUnreadAfter, oldest first, and
// only when no connection is idle.
func TestNewConnectionEvictsOldestUnreadAfterASecond(t *testing.T) {
	t.Parallel() // waits evictUnreadAfter
	dl := testListener(t, 2)
	clients := dialN(t, dl, 3)
	mustAccept(t, acceptAsync(dl))
	mustAccept(t, acceptAsync(dl))
	start := time.Now()
	z := mustAccept(t, acceptAsync(dl))
	if waited := time.Since(start); waited < evictUnreadAfter-200*time.Millisecond {
		t.Fatalf("an unread connection was evicted after %v", waited)
	}
	if got := readState(clients[0], 2*time.Second); got != "eof" {
		t.Fatalf("the oldest unread client reads %q, want eof", got)
	}
	if idle, unread := dl.Evictions(); idle != 0 || unread != 1 {
		t.Fatalf("evictions idle %d unread %d, want 0 1", idle, unread)
	}
	// The second connection has been unread for more than evictUnreadAfter now; the third served a request
	// and is idle: the idle one goes first.
	dl.connState(z, http.StateActive)
	dl.connState(z, http.StateIdle)
	dialN(t, dl, 1)
	start = time.Now()
	mustAccept(t, acceptAsync(dl))
	if got := readState(clients[2], 2*time.Second); got != "eof" || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("the idle client reads %q after %v, want eof at once", got, time.Since(start))
	}
	if got := readState(clients[1], 50*time.Millisecond); got != "open" {
		t.Fatalf("the unread client reads %q, want open", got)
	}
	if idle, unread := dl.Evictions(); idle != 1 || unread != 1 {
		t.Fatalf("evictions idle %d unread %d, want 1 1", idle, unread)
	}
}

// A drain whose connection finds every slot held by requests in progress serves it beyond the limit within
// `quiet` rather than lose it, then ends.
func TestDrainServesATakenConnectionBeyondTheLimit(t *testing.T) {
	dl := testListener(t, 1)
	dialN(t, dl, 1)
	x := mustAccept(t, acceptAsync(dl))
	dl.connState(x, http.StateActive)
	dialN(t, dl, 1)
	next := acceptAsync(dl)
	time.Sleep(100 * time.Millisecond)
	dl.startDrain(50 * time.Millisecond)
	z := mustAccept(t, next)
	if z.(*serverConn).release != nil || len(dl.slots) != 1 {
		t.Fatalf("the connection served while draining holds a slot (%d held)", len(dl.slots))
	}
	if _, err := dl.Accept(); !errors.Is(err, errDrained) {
		t.Fatalf("accept after the queue emptied: %v", err)
	}
}

// Closing the listener ends an Accept waiting for a slot (net/http's Close while models load).
func TestCloseEndsAcceptWaitingForASlot(t *testing.T) {
	dl := testListener(t, 1)
	dialN(t, dl, 1)
	x := mustAccept(t, acceptAsync(dl))
	dl.connState(x, http.StateActive)
	dialN(t, dl, 1)
	errc := make(chan error, 1)
	go func() { _, err := dl.Accept(); errc <- err }()
	time.Sleep(50 * time.Millisecond)
	dl.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("accept: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("accept still waits for a slot after Close")
	}
}
