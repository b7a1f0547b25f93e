package robustness

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/edgebase/edgebase/internal/hookcheck"
)

// HookWrite is one write of the trigger workload: a set of Data (nil: a
// delete) at Path through Node, and what it answered. Every set's data is
// unique in the run, so a committed change names the write it came from.
type HookWrite struct {
	Path    string          `json:"path"`
	Data    json.RawMessage `json:"data,omitempty"`
	Node    string          `json:"node"`
	Outcome Outcome         `json:"outcome"`
	Rev     uint64          `json:"rev,omitempty"` // X-Revision, when OutOK
	Err     string          `json:"err,omitempty"`
}

// HookChange is one committed change of the workload's collection, as a
// realtime stream resumed from before the first write delivered it.
type HookChange struct {
	Revision uint64          `json:"revision"`
	Path     string          `json:"path"`
	Delete   bool            `json:"delete,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"`
}

// HookExpected settles what a trigger on the workload's collection must
// deliver, from the committed changes (which the collection held none of
// before: a path's first set is a create), and checks them against the
// writes, so that the list cannot be short:
//
//   - every acknowledged set is committed at its revision with its data;
//     an acknowledged delete is committed at its revision unless the path
//     was absent then (deleting nothing changes nothing);
//   - every committed set is a write of the run that was acknowledged at
//     that revision or whose outcome is unknown; every committed delete is
//     such a delete of its path;
//   - no write that definitely failed is committed.
//
// Every committed change is expected (writes of unknown outcome that took
// effect included); unknown counts those.
func HookExpected(trigger string, writes []HookWrite, committed []HookChange) (expected []hookcheck.Expected, unknown int, errs []error) {
	bySet := map[string]HookWrite{} // canonical data -> its write
	unknownDeletes := map[string]bool{}
	ackedDeletes := map[string]map[uint64]bool{}
	for _, w := range writes {
		switch {
		case w.Data != nil:
			k := canonical(w.Data)
			if _, dup := bySet[k]; dup {
				errs = append(errs, fmt.Errorf("workload: data %s written twice: changes cannot name their writes", w.Data))
			}
			bySet[k] = w
		case w.Outcome == OutUnknown:
			unknownDeletes[w.Path] = true
		case w.Outcome == OutOK:
			if ackedDeletes[w.Path] == nil {
				ackedDeletes[w.Path] = map[uint64]bool{}
			}
			ackedDeletes[w.Path][w.Rev] = true
		}
	}

	cs := slices.Clone(committed)
	slices.SortStableFunc(cs, func(a, b HookChange) int { return cmpUint(a.Revision, b.Revision) })
	exists := map[string]bool{}
	history := map[string][]HookChange{} // per path, in revision order
	setAt := map[string]uint64{}         // canonical data -> committed revision
	for i, c := range cs {
		if i > 0 && c.Revision == cs[i-1].Revision && c.Path == cs[i-1].Path {
			errs = append(errs, fmt.Errorf("committed: two changes of %s at revision %d", c.Path, c.Revision))
			continue
		}
		history[c.Path] = append(history[c.Path], c)
		e := hookcheck.Expected{Trigger: trigger, Path: c.Path, Revision: c.Revision}
		if c.Delete {
			e.Type = "delete"
			if !exists[c.Path] {
				errs = append(errs, fmt.Errorf("committed: a delete of %s at %d, which did not exist", c.Path, c.Revision))
			}
			if !ackedDeletes[c.Path][c.Revision] && !unknownDeletes[c.Path] {
				errs = append(errs, fmt.Errorf("committed: a delete of %s at %d that no acknowledged or unknown delete made", c.Path, c.Revision))
			}
			if !ackedDeletes[c.Path][c.Revision] {
				unknown++
			}
		} else {
			e.Type, e.After = "create", c.Data
			if exists[c.Path] {
				e.Type = "update"
			}
			k := canonical(c.Data)
			w, ok := bySet[k]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("committed: %s = %s at %d, which no write of the run made", c.Path, c.Data, c.Revision))
			case w.Path != c.Path:
				errs = append(errs, fmt.Errorf("committed: %s = %s at %d, written to %s", c.Path, c.Data, c.Revision, w.Path))
			case w.Outcome == OutOK && w.Rev != c.Revision:
				errs = append(errs, fmt.Errorf("committed: %s = %s at %d, acknowledged at %d", c.Path, c.Data, c.Revision, w.Rev))
			case w.Outcome == OutUnknown:
				unknown++
			case w.Outcome != OutOK:
				errs = append(errs, fmt.Errorf("committed: %s = %s at %d, whose write failed (%s: %s)", c.Path, c.Data, c.Revision, w.Outcome, w.Err))
			}
			if _, again := setAt[k]; again {
				errs = append(errs, fmt.Errorf("committed: %s = %s twice", c.Path, c.Data))
			}
			setAt[k] = c.Revision
		}
		exists[c.Path] = !c.Delete
		expected = append(expected, e)
	}

	for _, w := range writes {
		if w.Outcome != OutOK {
			continue
		}
		if w.Data != nil {
			if _, ok := setAt[canonical(w.Data)]; !ok {
				errs = append(errs, fmt.Errorf("lost: %s = %s acknowledged at %d through %s, never committed", w.Path, w.Data, w.Rev, w.Node))
			}
			continue
		}
		// An acknowledged delete: a change at its revision, or the path
		// absent just before it.
		h := history[w.Path]
		i, found := slices.BinarySearchFunc(h, w.Rev, func(c HookChange, r uint64) int { return cmpUint(c.Revision, r) })
		if found {
			if !h[i].Delete {
				errs = append(errs, fmt.Errorf("lost: the delete of %s acknowledged at %d, committed as a set", w.Path, w.Rev))
			}
			continue
		}
		if i > 0 && !h[i-1].Delete {
			errs = append(errs, fmt.Errorf("lost: the delete of %s acknowledged at %d, which existed then (set at %d), never committed", w.Path, w.Rev, h[i-1].Revision))
		}
	}
	return expected, unknown, errs
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// canonical is a JSON text re-encoded (object keys sorted), for comparing
// values.
func canonical(b json.RawMessage) string {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return string(b)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return string(b)
	}
	return string(out)
}
