package robustness

import (
	"fmt"
	"sort"
)

// QueriedDoc is one document a query round returned: its path and its "v".
type QueriedDoc struct {
	Path  string
	Value string
}

// AckedCreate is a create of a log document that was acknowledged, with the
// time its answer arrived (nanoseconds since the run began).
type AckedCreate struct {
	Path  string
	Value string
	Acked int64
}

// CheckQueryRound judges one strong query round over the log collection,
// ordered by v: a round that started at start must return every create
// acknowledged before start (a strong query reflects every acknowledged
// write), each document once (the cursors of its pages are stable under the
// writes that went on between them), in order by v then path, each with the
// value it was created with (log documents are never overwritten). It
// returns what is wrong, at most limit lines.
func CheckQueryRound(start int64, acked []AckedCreate, got []QueriedDoc, limit int) []string {
	var bad []string
	add := func(f string, a ...any) {
		if len(bad) < limit {
			bad = append(bad, fmt.Sprintf(f, a...))
		}
	}
	seen := make(map[string]string, len(got))
	for i, d := range got {
		if _, dup := seen[d.Path]; dup {
			add("%s returned twice", d.Path)
		}
		seen[d.Path] = d.Value
		if i > 0 {
			p := got[i-1]
			if p.Value > d.Value || (p.Value == d.Value && p.Path >= d.Path) {
				add("out of order: %s (v %q) after %s (v %q)", d.Path, d.Value, p.Path, p.Value)
			}
		}
	}
	sorted := append([]AckedCreate(nil), acked...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	for _, a := range sorted {
		if a.Acked >= start {
			continue
		}
		v, ok := seen[a.Path]
		switch {
		case !ok:
			add("missing: %s (acknowledged %.3fs, before the query at %.3fs)", a.Path, float64(a.Acked)/1e9, float64(start)/1e9)
		case v != a.Value:
			add("%s has v %q, created as %q", a.Path, v, a.Value)
		}
	}
	return bad
}
