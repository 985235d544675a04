package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cutenative/cutenative/go/server"
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

// -max-conns: a connection beyond the limit waits for a slot until one closes (it has sent nothing, so it
// could be evicted only after evictUnreadAfter; the ones behind it wait in the kernel's queue).
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

// TestDrainAnswersEveryWrittenRequest's scenario with -max-conns below the number of written requests: most
// of them wait for a slot, in Accept or in the kernel's queue, when SIGTERM comes; the drain still takes
// and answers every one (a connection it takes that finds no slot within `quiet` is served beyond the
// limit). 5 rounds.
func TestDrainWithEverySlotTakenAnswersEveryWrittenRequest(t *testing.T) {
	raw := postReq("/v1/forecast", smallForecast)
	raw = strings.Replace(raw, "Host: localhost\r\n", "Host: localhost\r\nConnection: close\r\n", 1)
	const n, rounds = 100, 5
	for round := 0; round < rounds; round++ {
		t.Run(fmt.Sprintf("round %d", round), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			stop := make(chan os.Signal, 1)
			ready := make(chan string, 1)
			done := make(chan error, 1)
			go func() {
				done <- run(slog.New(slog.NewTextHandler(io.Discard, nil)), options{models: "default=defaultmodel",
					device: "cpu", dtype: "f32", mode: "eager", maxConns: 16, listener: ln, stop: stop,
					ready: func(a string) { ready <- a }, cfg: server.Config{Timeout: 30 * time.Second}})
			}()
			var addr string
			select {
			case addr = <-ready:
			case err := <-done:
				t.Fatalf("run ended before it was ready: %v", err)
			}
			conns := make([]*httpConn, n)
			for i := range conns {
				conns[i] = dialHTTP(t, addr)
				defer conns[i].Close()
				if _, err := io.WriteString(conns[i], raw); err != nil {
					t.Fatalf("write %d: %v", i, err)
				}
			}
			stop <- syscall.SIGTERM
			var wg sync.WaitGroup
			for i, c := range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
					resp, body, err := c.readResponse()
					if err != nil || resp.StatusCode != 200 || !strings.Contains(string(body), `"forecasts"`) {
						t.Errorf("request %d: %v %v %s", i, err, resp, body)
					}
				}()
			}
			wg.Wait()
			if err := <-done; err != nil {
				t.Fatalf("run: %v", err)
			}
		})
	}
}
