package main

import (
	"fmt"
	"strings"
)

const tableHeader = "| scenario | what was sent | statuses | errors (code: message) | p50 / p99 / max | server RSS before / peak / after | alive | notes |\n" +
	"|---|---|---|---|---|---|---|---|"

// row is one line of the table.
type row struct {
	scenario, sent string
	t              *tally // nil: "-"
	mem            window
	alive          string
	notes          string
}

func (r row) format() string {
	statuses, errs, lats := "-", "-", "-"
	if r.t != nil {
		statuses, errs, lats = r.t.statusText(), r.t.errorText(), r.t.latText()
	}
	alive := r.alive
	if alive == "" {
		alive = "-"
	}
	cells := []string{r.scenario, r.sent, statuses, errs, lats, r.mem.String(), alive, r.notes}
	for i, c := range cells {
		if c == "" {
			c = "-"
		}
		cells[i] = cell(c)
	}
	return "| " + strings.Join(cells, " | ") + " |"
}

// cell makes s safe inside a markdown table cell: one line, pipes escaped.
func cell(s string) string {
	s = strings.ReplaceAll(s, "\r", " ")
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// aliveText is the alive column: yes, no, or killed by this tool at its RSS limit.
func (c *abuser) aliveText() string {
	if at := c.mon.killed(); at > 0 {
		return fmt.Sprintf("no: killed by the tool at %s RSS", fmtBytes(at))
	}
	if c.mon.alive() {
		if c.mon.pid <= 0 {
			return "? (no -pid)"
		}
		return "yes"
	}
	return "no: the process ended"
}
