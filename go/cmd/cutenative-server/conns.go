package main

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// evictUnreadAfter is how long a connection that has sent no byte yet keeps its slot against a new one when
// every slot is taken: long enough for any client that means to send a request (it writes at once after its
// handshake), short enough that connections opened and left silent cannot hold the server.
const evictUnreadAfter = time.Second

// phase is what the listener knows of a connection it handed out. It follows http.Server.ConnState, and also
// the connection's own reads: net/http reports StateActive only once a request's whole header is read, and a
// request whose header is still arriving is in progress all the same.
type phase int32

const (
	phaseUnread   phase = iota // opened, no byte read yet (StateNew): evictable after evictUnreadAfter
	phaseIdle                  // a keep-alive between requests, no byte of the next one read (StateIdle): evictable
	phaseBusy                  // a request is being read or served (bytes read since the last answer, StateActive)
	phaseHijacked              // taken over by a handler (StateHijacked): never evicted, counted until closed
	phaseClosed                // closed, or chosen for eviction: in no list, never changes again
)

// serverConn is every connection the drain listener hands to http.Server. It
//   - holds a connection slot (release, nil when none) and gives it back exactly once, on the first Close;
//   - tells the listener's connection table (table, nil without -max-conns) when a request starts: its first
//     byte read marks it busy, before net/http's ConnState hook would;
//   - answers net/http's own plain-text errors in JSON (httperr.go).
type serverConn struct {
	net.Conn
	table   *connTable
	release func()
	once    sync.Once

	phase      atomic.Int32 // a phase; written under table.mu, read without it by Read
	since      time.Time    // when it entered phaseUnread or phaseIdle (under table.mu)
	prev, next *serverConn  // its place in table.unread or table.idle (under table.mu)
}

func (c *serverConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.table != nil {
		if ph := phase(c.phase.Load()); ph == phaseUnread || ph == phaseIdle {
			c.table.set(c, phaseBusy)
		}
	}
	return n, err
}

// Write sends p, except one of net/http's pre-handler plain-text errors, which goes out as its JSON form
// (reported as len(p) bytes written: the caller wrote what it meant to).
func (c *serverConn) Write(p []byte) (int, error) {
	if resp, ok := jsonFromPlainError(p); ok {
		if _, err := c.Conn.Write(resp); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// Close closes the connection; the first call also takes it out of the table, then gives its slot back.
func (c *serverConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		if c.table != nil {
			c.table.set(c, phaseClosed)
		}
		if c.release != nil {
			c.release()
		}
	})
	return err
}

// CloseWrite half-closes a TCP connection: net/http does so after its 431 answer, before it waits for the
// client to stop sending, so that the client reads the answer instead of a reset.
func (c *serverConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// ReadFrom keeps the TCP connection's own (sendfile, splice) for bodies copied with io.Copy, as net/http
// uses it on the connection Accept returned.
func (c *serverConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// connList is a list of connections in the order they entered it: its head has waited longest.
type connList struct{ head, tail *serverConn }

func (l *connList) push(c *serverConn) {
	c.prev, c.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = c
	} else {
		l.head = c
	}
	l.tail = c
}

func (l *connList) remove(c *serverConn) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		l.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		l.tail = c.prev
	}
	c.prev, c.next = nil, nil
}

// connTable knows the phase of every connection holding a slot, and which one to evict when a new
// connection finds every slot taken: the one idle the longest, else the oldest that has sent nothing for
// evictUnreadAfter, never one with a request in progress. Its transitions are O(1).
type connTable struct {
	mu     sync.Mutex
	unread connList // phaseUnread, oldest first
	idle   connList // phaseIdle, longest idle first

	// evictable gets a token (never blocking) when a connection goes idle: an Accept waiting for a slot
	// looks again.
	evictable chan struct{}

	evictedIdle, evictedUnread atomic.Uint64
}

func newConnTable() *connTable { return &connTable{evictable: make(chan struct{}, 1)} }

// add tracks c, just taken from the kernel with a slot of its own, as unread since now.
func (t *connTable) add(c *serverConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c.table = t
	c.phase.Store(int32(phaseUnread))
	c.since = time.Now()
	t.unread.push(c)
}

// set moves c to phase to (phaseClosed is final).
func (t *connTable) set(c *serverConn, to phase) {
	t.mu.Lock()
	defer t.mu.Unlock()
	from := phase(c.phase.Load())
	if from == phaseClosed || from == to {
		return
	}
	switch from {
	case phaseUnread:
		t.unread.remove(c)
	case phaseIdle:
		t.idle.remove(c)
	}
	c.phase.Store(int32(to))
	if to == phaseIdle {
		c.since = time.Now()
		t.idle.push(c)
		select {
		case t.evictable <- struct{}{}:
		default:
		}
	}
}

// victim takes out of the table the connection to evict now, or returns nil and how long until the oldest
// unread connection becomes evictable (0: none is waiting to). An idle connection whose next request is on
// its way but not read yet can be chosen, as net/http's IdleTimeout can close it: that is the race of every
// keep-alive close, which clients meet by sending again on a new connection.
func (t *connTable) victim(now time.Time) (*serverConn, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.idle.head
	if c != nil {
		t.idle.remove(c)
		t.evictedIdle.Add(1)
	} else if c = t.unread.head; c == nil {
		return nil, 0
	} else if age := now.Sub(c.since); age < evictUnreadAfter {
		return nil, evictUnreadAfter - age
	} else {
		t.unread.remove(c)
		t.evictedUnread.Add(1)
	}
	c.phase.Store(int32(phaseClosed))
	return c, 0
}

// connState is the http.Server's ConnState hook: it keeps the table's phases. StateNew needs nothing (the
// connection entered the table unread when Accept took it), StateClosed comes after net/http's Close.
func (l *drainListener) connState(nc net.Conn, s http.ConnState) {
	c, ok := nc.(*serverConn)
	if !ok || c.table == nil {
		return
	}
	switch s {
	case http.StateActive:
		c.table.set(c, phaseBusy)
	case http.StateIdle:
		c.table.set(c, phaseIdle)
	case http.StateHijacked:
		c.table.set(c, phaseHijacked)
	case http.StateClosed:
		c.table.set(c, phaseClosed)
	}
}

// Evictions counts the connections closed so far to make room for new ones: idle keep-alives, and new
// connections that had sent nothing for evictUnreadAfter. Nothing is logged per eviction.
func (l *drainListener) Evictions() (idle, new uint64) {
	if l.conns == nil { // no -max-conns: nothing is ever evicted
		return 0, 0
	}
	return l.conns.evictedIdle.Load(), l.conns.evictedUnread.Load()
}
