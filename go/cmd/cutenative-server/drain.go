package main

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// errDrained ends http.Server.Serve once a draining listener has taken every connection the kernel had
// accepted.
var errDrained = errors.New("listener drained")

// drainListener wraps the server's listener with two duties:
//   - at most maxConns connections open at once (0: no limit). Accept takes a connection from the kernel,
//     then a slot for it; when every slot is taken it makes room by closing the connection idle the longest
//     (a keep-alive between requests), else the oldest that has sent no byte for evictUnreadAfter, never one
//     with a request being read or served (conns.go); when none can go, the connection waits for a slot,
//     and the ones behind it wait in the kernel's queue. So a flood of idle keep-alive connections cannot
//     keep health checks and requests out: each new connection displaces the stalest one;
//   - a drain that loses nothing: after startDrain, Accept keeps taking connections (each one already
//     completed its TCP handshake, and its request may be written) until none has arrived for `quiet`, then
//     ends Serve with errDrained. Closing the listener at once, as http.Server.Shutdown does, resets the
//     connections still queued in the kernel. A connection taken while draining that finds no slot free
//     within `quiet` is served beyond the limit: closing it would lose its request.
//
// Every connection it hands out is a *serverConn, which also answers net/http's own plain-text errors in
// JSON (httperr.go); the http.Server's ConnState hook must be connState.
type drainListener struct {
	net.Listener
	slots     chan struct{} // nil: no limit
	conns     *connTable    // the connections holding slots; nil: no limit
	draining  atomic.Bool
	quiet     atomic.Int64  // nanoseconds
	until     atomic.Int64  // unix nanoseconds after which the drain takes nothing more
	taken     atomic.Int64  // connections taken while draining
	stop      chan struct{} // closed by startDrain: bounds an Accept's wait for a connection slot
	stopOnce  sync.Once
	closed    chan struct{} // closed by Close: ends an Accept's wait for a connection slot
	closeOnce sync.Once
}

// maxAcceptPhase bounds how long a drain keeps taking new connections when they keep arriving.
const maxAcceptPhase = 5 * time.Second

func newDrainListener(l net.Listener, maxConns int) *drainListener {
	d := &drainListener{Listener: l, stop: make(chan struct{}), closed: make(chan struct{})}
	if maxConns > 0 {
		d.slots = make(chan struct{}, maxConns)
		d.conns = newConnTable()
	}
	return d
}

type deadliner interface{ SetDeadline(time.Time) error }

// startDrain switches Accept to draining; a blocked Accept wakes within quiet (a kernel accept through the
// listener's deadline, a wait for a connection slot through stop).
func (l *drainListener) startDrain(quiet time.Duration) {
	l.quiet.Store(int64(quiet))
	l.until.Store(time.Now().Add(maxAcceptPhase).UnixNano())
	l.draining.Store(true)
	l.stopOnce.Do(func() { close(l.stop) })
	if d, ok := l.Listener.(deadliner); ok {
		_ = d.SetDeadline(time.Now().Add(quiet))
	}
}

// Close closes the listener and ends an Accept waiting for a slot (its connection is closed).
func (l *drainListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

func (l *drainListener) Accept() (net.Conn, error) {
	for {
		draining := l.draining.Load()
		if draining {
			d, ok := l.Listener.(deadliner)
			if !ok || time.Now().UnixNano() > l.until.Load() {
				return nil, errDrained
			}
			_ = d.SetDeadline(time.Now().Add(time.Duration(l.quiet.Load())))
		}
		c, err := l.Listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if l.draining.Load() {
					return nil, errDrained // nothing arrived for `quiet`: the kernel's queue is empty
				}
				continue // the deadline that woke us was startDrain's, seen before its flag
			}
			return nil, err
		}
		if draining || l.draining.Load() {
			l.taken.Add(1)
		}
		return l.admit(c)
	}
}

// admit gives c, just taken from the kernel, a connection slot: a free one, else one freed by evicting
// (conns.go), else the first one a closing connection gives back. Connections that become evictable while
// it waits (one goes idle, an unread one comes of age) are evicted then. Once draining, it waits at most
// `quiet` more, then lets c in without a slot.
func (l *drainListener) admit(c net.Conn) (net.Conn, error) {
	sc := &serverConn{Conn: c}
	if l.slots == nil {
		return sc, nil
	}
	stop := l.stop
	var giveUp <-chan time.Time
	var aged *time.Timer // an unread connection comes of age
	defer func() {
		if aged != nil {
			aged.Stop()
		}
	}()
	for {
		select {
		case l.slots <- struct{}{}: // free, or just freed by an eviction
			return l.track(sc), nil
		default:
		}
		victim, wait := l.conns.victim(time.Now())
		if victim != nil {
			_ = victim.Close() // gives its slot back before it returns
			continue
		}
		var agedC <-chan time.Time
		if wait > 0 {
			if aged == nil {
				aged = time.NewTimer(wait)
			} else {
				resetTimer(aged, wait)
			}
			agedC = aged.C
		}
		select {
		case l.slots <- struct{}{}:
			return l.track(sc), nil
		case <-l.conns.evictable:
		case <-agedC:
		case <-stop:
			stop = nil
			giveUp = time.After(time.Duration(l.quiet.Load()))
		case <-giveUp:
			return sc, nil // draining: served beyond the limit rather than lost
		case <-l.closed:
			_ = c.Close()
			return nil, net.ErrClosed
		}
	}
}

// track enters c, which holds a slot now, in the connection table; its first Close gives the slot back.
func (l *drainListener) track(c *serverConn) *serverConn {
	c.release = func() { <-l.slots }
	l.conns.add(c)
	return c
}

// resetTimer sets t to fire after d, dropping a tick it may hold from before (go.mod's go 1.22 keeps the
// timer channels' pre-1.23 behaviour).
func resetTimer(t *time.Timer, d time.Duration) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(d)
}
