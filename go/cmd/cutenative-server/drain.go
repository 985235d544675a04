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
//   - at most maxConns connections open at once (0: no limit); more wait in the kernel's accept queue;
//   - a drain that loses nothing: after startDrain, Accept keeps taking connections (each one already
//     completed its TCP handshake, and its request may be written) until none has arrived for `quiet`, then
//     ends Serve with errDrained. Closing the listener at once, as http.Server.Shutdown does, resets the
//     connections still queued in the kernel.
type drainListener struct {
	net.Listener
	slots    chan struct{} // nil: no limit
	draining atomic.Bool
	quiet    atomic.Int64  // nanoseconds
	until    atomic.Int64  // unix nanoseconds after which the drain takes nothing more
	taken    atomic.Int64  // connections taken while draining
	stop     chan struct{} // closed by startDrain: wakes an Accept waiting for a connection slot
	stopOnce sync.Once
}

// maxAcceptPhase bounds how long a drain keeps taking new connections when they keep arriving.
const maxAcceptPhase = 5 * time.Second

func newDrainListener(l net.Listener, maxConns int) *drainListener {
	d := &drainListener{Listener: l, stop: make(chan struct{})}
	if maxConns > 0 {
		d.slots = make(chan struct{}, maxConns)
	}
	return d
}

type deadliner interface{ SetDeadline(time.Time) error }

// startDrain switches Accept to draining; a blocked Accept wakes within quiet (or at once when it waits for
// a connection slot: the connections holding them are being served, not new ones).
func (l *drainListener) startDrain(quiet time.Duration) {
	l.quiet.Store(int64(quiet))
	l.until.Store(time.Now().Add(maxAcceptPhase).UnixNano())
	l.draining.Store(true)
	l.stopOnce.Do(func() { close(l.stop) })
	if d, ok := l.Listener.(deadliner); ok {
		_ = d.SetDeadline(time.Now().Add(quiet))
	}
}

func (l *drainListener) Accept() (net.Conn, error) {
	if l.slots != nil {
		select {
		case l.slots <- struct{}{}: // a connection's Close gives the slot back
		case <-l.stop:
			// Draining with every slot taken: try for one only while others free up (they are finishing).
			select {
			case l.slots <- struct{}{}:
			case <-time.After(time.Duration(l.quiet.Load())):
				return nil, errDrained
			}
		}
	}
	release := func() {
		if l.slots != nil {
			<-l.slots
		}
	}
	for {
		draining := l.draining.Load()
		if draining {
			d, ok := l.Listener.(deadliner)
			if !ok || time.Now().UnixNano() > l.until.Load() {
				release()
				return nil, errDrained
			}
			_ = d.SetDeadline(time.Now().Add(time.Duration(l.quiet.Load())))
		}
		c, err := l.Listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if l.draining.Load() {
					release()
					return nil, errDrained // nothing arrived for `quiet`: the kernel's queue is empty
				}
				continue // the deadline that woke us was startDrain's, seen before its flag
			}
			release()
			return nil, err
		}
		if draining || l.draining.Load() {
			l.taken.Add(1)
		}
		if l.slots == nil {
			return c, nil
		}
		return &slotConn{Conn: c, release: release}, nil
	}
}

// slotConn gives its connection slot back once, on the first Close.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
