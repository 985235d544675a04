package main

import (
	"errors"
	"net"
	"testing"
	"time"
)

// testListener is a drain listener on a loopback port, closed with the test.
func testListener(t *testing.T, maxConns int) *drainListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dl := newDrainListener(ln, maxConns)
	t.Cleanup(func() { dl.Close() })
	return dl
}

// -max-conns: a connection beyond the limit waits in the kernel's queue until one closes.
func TestDrainListenerLimitsOpenConnections(t *testing.T) {
	dl := testListener(t, 2)
	ln := dl.Listener
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := dl.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	var clients []net.Conn
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	first, second := <-accepted, <-accepted
	select {
	case <-accepted:
		t.Fatal("a third connection was taken with two open")
	case <-time.After(200 * time.Millisecond):
	}
	first.Close()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the third connection was not taken after one closed")
	}
	second.Close()
}

// A drain with every connection slot taken (by a keep-alive connection, say) still ends: Accept does not wait
// for a slot that only closing connections can free.
func TestDrainEndsWithEverySlotTaken(t *testing.T) {
	dl := testListener(t, 1)
	ln := dl.Listener
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	held, err := dl.Accept() // the only slot, kept open
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	done := make(chan error, 1)
	go func() {
		_, err := dl.Accept()
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	dl.startDrain(50 * time.Millisecond)
	select {
	case err := <-done:
		if !errors.Is(err, errDrained) {
			t.Fatalf("accept: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the drain waited for a connection slot")
	}
}

// A draining listener takes what is queued, then ends with errDrained once nothing arrives for `quiet`.
func TestDrainListenerTakesQueuedConnectionsThenEnds(t *testing.T) {
	dl := testListener(t, 0)
	ln := dl.Listener
	for i := 0; i < 5; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	dl.startDrain(50 * time.Millisecond)
	n := 0
	for {
		c, err := dl.Accept()
		if err != nil {
			if !errors.Is(err, errDrained) {
				t.Fatalf("accept: %v", err)
			}
			break
		}
		c.Close()
		n++
	}
	if n != 5 || dl.taken.Load() != 5 {
		t.Fatalf("took %d (counted %d), want 5", n, dl.taken.Load())
	}
}
