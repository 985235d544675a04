package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// monitor watches the server's memory: VmRSS sampled every 10 ms (the running peak since the last begin),
// VmHWM reset through clear_refs where permitted, and a limit past which it kills the server.
type monitor struct {
	pid   int
	limit int64 // bytes; 0: none
	peak  atomic.Int64
	stop  chan struct{}
	done  sync.WaitGroup

	mu       sync.Mutex
	killedAt int64 // RSS in bytes at which the monitor killed the server; 0: it did not
}

const sampleEvery = 10 * time.Millisecond

func newMonitor(pid int, limit int64) *monitor {
	m := &monitor{pid: pid, limit: limit, stop: make(chan struct{})}
	if pid <= 0 {
		return m
	}
	m.done.Add(1)
	go func() {
		defer m.done.Done()
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				m.sample()
			}
		}
	}()
	return m
}

func (m *monitor) close() {
	close(m.stop)
	m.done.Wait()
}

func (m *monitor) sample() {
	rss, _, ok := m.read()
	if !ok {
		return
	}
	for {
		p := m.peak.Load()
		if rss <= p || m.peak.CompareAndSwap(p, rss) {
			break
		}
	}
	if m.limit > 0 && rss > m.limit {
		m.mu.Lock()
		if m.killedAt == 0 {
			m.killedAt = rss
			_ = syscall.Kill(m.pid, syscall.SIGKILL)
		}
		m.mu.Unlock()
	}
}

// read returns the server's VmRSS and VmHWM in bytes.
func (m *monitor) read() (rss, hwm int64, ok bool) {
	if m.pid <= 0 {
		return 0, 0, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", m.pid))
	if err != nil {
		return 0, 0, false
	}
	return parseStatus(string(b))
}

// parseStatus reads VmRSS and VmHWM (in kB) from the text of /proc/<pid>/status, in bytes.
func parseStatus(s string) (rss, hwm int64, ok bool) {
	var haveRSS bool
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			rss, haveRSS = v*1024, true
		case "VmHWM:":
			hwm = v * 1024
		}
	}
	return rss, hwm, haveRSS
}

// alive reports whether the server process exists and is not a zombie (the script that started it reaps it
// only after this tool is done).
func (m *monitor) alive() bool {
	if m.pid <= 0 {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", m.pid))
	if err != nil {
		return false
	}
	return procAlive(string(b))
}

// procAlive reads the state from the text of /proc/<pid>/stat ("pid (comm) S ..."; comm may hold spaces and
// parentheses).
func procAlive(stat string) bool {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	switch stat[i+2] {
	case 'Z', 'X', 'x':
		return false
	}
	return true
}

// window is the server's memory over one row's requests.
type window struct {
	measured            bool
	before, peak, after int64
	hwm                 bool // peak from VmHWM (reset at begin), else from the 10 ms samples
}

// begin resets the peak (VmHWM through clear_refs, and the samples) and reads RSS before.
func (m *monitor) begin() window {
	rss, _, ok := m.read()
	if !ok {
		return window{}
	}
	w := window{measured: true, before: rss}
	w.hwm = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", m.pid), []byte("5"), 0) == nil
	m.peak.Store(rss)
	return w
}

// end reads RSS after and the peak since begin.
func (m *monitor) end(w window) window {
	if !w.measured {
		return w
	}
	m.sample()
	w.peak = m.peak.Load()
	rss, hwm, ok := m.read()
	if !ok {
		w.after = -1 // the process is gone
		return w
	}
	w.after = rss
	if w.hwm && hwm > w.peak {
		w.peak = hwm
	}
	return w
}

// killed returns the RSS at which the monitor killed the server, 0 if it did not.
func (m *monitor) killed() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.killedAt
}

func (w window) String() string {
	if !w.measured {
		return "-"
	}
	after := "gone"
	if w.after >= 0 {
		after = fmtBytes(w.after)
	}
	how := "sampled"
	if w.hwm {
		how = "HWM"
	}
	return fmt.Sprintf("%s / %s (%s) / %s", fmtBytes(w.before), fmtBytes(w.peak), how, after)
}

// fmtBytes is decimal megabytes below 1 GB ("312 MB"), gigabytes above ("4.31 GB").
func fmtBytes(b int64) string {
	if b < 1e9 {
		return fmt.Sprintf("%d MB", (b+500_000)/1_000_000)
	}
	return fmt.Sprintf("%.2f GB", float64(b)/1e9)
}
