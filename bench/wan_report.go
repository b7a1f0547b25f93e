package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/edgebase/edgebase/internal/wan"
)

// wanRegions are the client regions, in the table's column order.
var wanRegions = []wan.Region{wan.US, wan.EU, wan.AP}

// wanReport is one --wan run.
type wanReport struct {
	Command string      `json:"command"`
	Started string      `json:"started"`
	Seconds float64     `json:"seconds"`
	Profile wan.Profile `json:"-"`
	Args    []string    `json:"nodeArgs"`
	Samples int         `json:"samples"`
	// LinksSimulated: the binary has --connect-to, so node-to-node
	// traffic crosses the simulated WAN too (not only the clients').
	LinksSimulated bool      `json:"nodeLinksSimulated"`
	Rows           []*wanRow `json:"-"`
	Failed         string    `json:"failed,omitempty"`
}

// wanCell is one measurement's figures for one client region.
type wanCell struct {
	N      int     `json:"n"`
	Errors int     `json:"errors,omitempty"`
	P50Ms  float64 `json:"p50Ms"`
	P99Ms  float64 `json:"p99Ms"`
	MaxMs  float64 `json:"maxMs"`
	// RTTToLeaderMs: the profile's round trip between the client's region
	// and the leader's, for reference.
	RTTToLeaderMs float64 `json:"rttToLeaderMs"`
}

// wanRow is one measurement: a row of the table and one JSON line.
type wanRow struct {
	ID          string              `json:"id"` // "1", "2a", ...
	Measurement string              `json:"measurement"`
	Leader      string              `json:"leader"` // the leader when it started
	Regions     map[string]*wanCell `json:"regions"`
	Notes       []string            `json:"notes,omitempty"`
	Failed      string              `json:"failed,omitempty"`
	Seconds     float64             `json:"seconds"`
}

// cellFrom summarises h (and the failed samples) for a region whose round
// trip to the leader is rtt.
func cellFrom(h *histogram, errs int, rtt time.Duration) *wanCell {
	return &wanCell{
		N: h.count(), Errors: errs,
		P50Ms: ms(h.percentile(50)), P99Ms: ms(h.percentile(99)), MaxMs: ms(h.max()),
		RTTToLeaderMs: ms(rtt),
	}
}

// fmtWANMs prints a latency for the table: one decimal, more below 10 ms.
func fmtWANMs(x float64) string {
	if x < 10 && x > -10 {
		return fmt.Sprintf("%.2f", x)
	}
	return fmt.Sprintf("%.1f", x)
}

// rttSummary is "us-eu 80ms, us-ap 150ms, eu-ap 220ms, ..." for the
// profile's round trips between the client regions, in their order.
func rttSummary(p wan.Profile) string {
	var parts []string
	for i, a := range wanRegions {
		for _, b := range wanRegions[i+1:] {
			parts = append(parts, fmt.Sprintf("%s-%s %v", a, b, p.Between(a, b)))
		}
	}
	intra := p.Between(wan.US, wan.US)
	return fmt.Sprintf("%s, intra-region %v, jitter ±%.0f%%", strings.Join(parts, ", "), intra, p.Jitter*100)
}

// writeWANReport prints the run's markdown table, its notes and one JSON
// line per measurement.
func writeWANReport(w io.Writer, rep *wanReport) {
	fmt.Fprintf(w, "\n### WAN: %s\n\n", rttSummary(rep.Profile))
	args := strings.Join(rep.Args, " ")
	if args == "" {
		args = "(none)"
	}
	fmt.Fprintf(w, "`%s`: node args %s; %d samples per region per latency row, sequential per client; %.0f s.\n\n", rep.Command, args, rep.Samples, rep.Seconds)
	if !rep.LinksSimulated {
		fmt.Fprintf(w, "**The binary has no --connect-to: node-to-node traffic bypassed the simulated WAN; only the clients' links were simulated.**\n\n")
	}
	writeWANTable(w, rep.Rows)
	var notes []string
	for _, r := range rep.Rows {
		for _, n := range r.Notes {
			notes = append(notes, fmt.Sprintf("%s: %s", r.ID, n))
		}
		if r.Failed != "" {
			notes = append(notes, fmt.Sprintf("%s: FAILED: %s", r.ID, r.Failed))
		}
	}
	if rep.Failed != "" {
		notes = append(notes, "run FAILED: "+rep.Failed)
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}
	fmt.Fprintln(w)
	enc := json.NewEncoder(w) // one line per value
	enc.SetEscapeHTML(false)
	_ = enc.Encode(rep)
	for _, r := range rep.Rows {
		_ = enc.Encode(r)
	}
}

// writeWANTable prints the rows as a markdown table: p50 and p99 in ms per
// client region, and each region's round trip to the leader.
func writeWANTable(w io.Writer, rows []*wanRow) {
	var b strings.Builder
	b.WriteString("| # | measurement | leader |")
	for _, r := range wanRegions {
		fmt.Fprintf(&b, " %s p50 | %s p99 |", r, r)
	}
	b.WriteString(" RTT to leader us/eu/ap | n/region |\n|---|---|---|")
	for range wanRegions {
		b.WriteString("---:|---:|")
	}
	b.WriteString("---|---:|\n")
	for _, row := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s |", row.ID, row.Measurement, row.Leader)
		var rtts []string
		n, errs := 0, 0
		for _, reg := range wanRegions {
			c := row.Regions[string(reg)]
			if c == nil || c.N == 0 {
				b.WriteString(" – | – |")
				rtts = append(rtts, "–")
				if c != nil {
					errs += c.Errors
				}
				continue
			}
			fmt.Fprintf(&b, " %s | %s |", fmtWANMs(c.P50Ms), fmtWANMs(c.P99Ms))
			rtts = append(rtts, fmt.Sprintf("%g", c.RTTToLeaderMs))
			n = max(n, c.N)
			errs += c.Errors
		}
		count := fmt.Sprint(n)
		if errs > 0 {
			count += fmt.Sprintf(" (%d failed)", errs)
		}
		if row.Failed != "" {
			count += " FAILED"
		}
		fmt.Fprintf(&b, " %s | %s |\n", strings.Join(rtts, "/"), count)
	}
	_, _ = io.WriteString(w, b.String())
}
