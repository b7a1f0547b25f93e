package robustness

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// logQuery is the query every checker runs: the whole log collection in
// order of v, served by the index declareLogIndex declares (so that index
// maintenance, its build, snapshots and restores are under the fault too).
func logQuery(pageSize int, cursor string) map[string]any {
	q := map[string]any{
		"collection": logCollection,
		"where":      []any{map[string]any{"field": "v", "op": ">=", "value": ""}},
		"orderBy":    []any{map[string]any{"field": "v"}},
		"limit":      pageSize,
	}
	if cursor != "" {
		q["startAfter"] = cursor
	}
	return q
}

// declareLogIndex declares the index of logQuery through n.
func (c *cluster) declareLogIndex(n *node) error {
	r, err := c.do(n, 10*time.Second, http.MethodPut, "/api/db/indexes", c.pr.Headers(),
		map[string]any{"indexes": []any{map[string]any{"collection": logCollection, "fields": []any{map[string]any{"field": "v"}}}}})
	if err != nil {
		return err
	}
	if r.Status != http.StatusOK {
		return fmt.Errorf("PUT /api/db/indexes: %s", r)
	}
	return nil
}

// queryAll pages through logQuery on n with headers h; any page that is
// not answered 200 ends the round with an error (under a fault that is
// expected: the round is then not judged).
func queryAll(c *cluster, n *node, h map[string]string, timeout time.Duration) ([]QueriedDoc, error) {
	var out []QueriedDoc
	cursor := ""
	for page := 0; page < 10000; page++ {
		r, err := c.do(n, timeout, http.MethodPost, "/api/db/query", h, logQuery(500, cursor))
		if err != nil {
			return nil, err
		}
		if r.Status != http.StatusOK {
			return nil, fmt.Errorf("%s", r)
		}
		var a struct {
			Documents []struct {
				Collection string `json:"collection"`
				Data       struct {
					V string `json:"v"`
				} `json:"data"`
			} `json:"documents"`
			NextCursor string `json:"nextCursor"`
		}
		if err := json.Unmarshal(r.Body, &a); err != nil {
			return nil, fmt.Errorf("decode %q: %w", r.Body, err)
		}
		for _, d := range a.Documents {
			out = append(out, QueriedDoc{Path: d.Collection, Value: d.Data.V})
		}
		if a.NextCursor == "" {
			return out, nil
		}
		cursor = a.NextCursor
	}
	return nil, fmt.Errorf("more than 10000 pages")
}

// queryChecker runs strong query rounds through one node during the load
// and judges each answered round against the creates acknowledged before
// it started.
type queryChecker struct {
	mu       sync.Mutex
	rounds   int // answered and judged
	failed   int // not answered (a page failed under the fault)
	failures []string
}

func (q *queryChecker) run(ctx context.Context, w *workload, n *node) {
	for ctx.Err() == nil {
		start := w.now()
		got, err := queryAll(w.c, n, w.c.pr.Headers(), w.opTimeout)
		if err != nil {
			q.mu.Lock()
			q.failed++
			q.mu.Unlock()
			select { // pacing while the fault lasts, not synchronisation
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
			}
			continue
		}
		_, creates := w.snapshot()
		acked := make([]AckedCreate, len(creates))
		for i, cr := range creates {
			acked[i] = AckedCreate{Path: cr.Path, Value: cr.Value, Acked: cr.Acked}
		}
		bad := CheckQueryRound(start, acked, got, 5)
		q.mu.Lock()
		q.rounds++
		for _, b := range bad {
			if len(q.failures) < 20 {
				q.failures = append(q.failures, fmt.Sprintf("query round on %s at %.3fs (%d documents): %s", n.id, float64(start)/1e9, len(got), b))
			}
		}
		q.mu.Unlock()
	}
}

func (q *queryChecker) result() (rounds, failed int, failures []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.rounds, q.failed, append([]string(nil), q.failures...)
}

// queryConvergence requires that, once it applied maxRev, every node's
// query answers exactly its listing of the log collection, in order of v:
// each node's index holds every document and nothing else.
func queryConvergence(c *cluster, maxRev uint64) []string {
	var failures []string
	h := maps.Clone(c.pr.Headers())
	h["X-Min-Revision"] = strconv.FormatUint(maxRev, 10)
	for _, n := range c.nodes {
		docs, _, err := listAll(c, n, c.pr.Headers(), logCollection, maxRev)
		if err != nil {
			failures = append(failures, fmt.Sprintf("query convergence: list on %s: %v", n.id, err))
			continue
		}
		got, err := queryAll(c, n, h, 30*time.Second)
		if err != nil {
			failures = append(failures, fmt.Sprintf("query convergence: query on %s: %v", n.id, err))
			continue
		}
		acked := make([]AckedCreate, 0, len(docs))
		for _, d := range docs {
			var v struct {
				V string `json:"v"`
			}
			_ = json.Unmarshal(d.Data, &v)
			acked = append(acked, AckedCreate{Path: d.Collection, Value: v.V})
		}
		if bad := CheckQueryRound(1, acked, got, 5); len(bad) > 0 || len(got) != len(docs) {
			failures = append(failures, fmt.Sprintf("query convergence on %s: %d documents queried, %d listed: %v", n.id, len(got), len(docs), bad))
		}
	}
	return failures
}
