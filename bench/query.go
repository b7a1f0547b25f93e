package main

// Query scenarios (issue 18, part 5): Q1 and Q2 run POST /api/db/query,
// "open orders, newest first, 20 at a time", against a collection of
// generated orders, with and without a declared index; with --peer
// pocketbase the same documents and the same query run side by side
// against PocketBase (query_pocketbase.go). Q3 is the live query
// (query_live.go).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/edgebase/edgebase/internal/proctest"
)

// The collections of the query scenarios (the PocketBase peer creates the
// same names, bench/pocketbase/main.go) and the statuses of the orders.
const (
	qIndexedColl   = "orders"
	qUnindexedColl = "orders_unindexed"
	qLimit         = 20
	// qBatch is how many documents one seeding batch writes (edgebase's
	// batch limit is 500; the peer allows as many).
	qBatch = 500
)

var qStatuses = []string{"open", "paid", "shipped", "cancelled"}

// order is one generated document of the query scenarios.
type order struct {
	Status    string  `json:"status"`
	Total     float64 `json:"total"`
	CreatedAt int64   `json:"createdAt"`
	Owner     string  `json:"owner"`
}

// qBaseTime is the createdAt of the oldest possible order (ms since 1970).
const qBaseTime = int64(1_700_000_000_000)

// genOrder is document i of a query collection, the same on every run and
// for both systems. createdAt is not in key order (documents are named by
// i), so neither system can answer "newest first" from its key order.
func genOrder(i int) order {
	r := rand.New(rand.NewPCG(uint64(i), 0x0e06))
	return order{
		Status:    qStatuses[r.IntN(len(qStatuses))],
		Total:     float64(r.IntN(100000)) / 100,
		CreatedAt: qBaseTime + r.Int64N(365*24*3600*1000),
		Owner:     "u" + strconv.Itoa(r.IntN(1000)),
	}
}

// qDocID is the document name of order i (edgebase: coll/<id>).
func qDocID(i int) string { return fmt.Sprintf("o%07d", i) }

// qStatus is the status client c's operation i queries: all four in turn.
func qStatus(c, i int) string { return qStatuses[(c+i)%len(qStatuses)] }

// qState is what the query scenarios set up on one edgebase env.
type qState struct {
	mu     sync.Mutex
	seeded map[string]int // collection -> documents written
}

func (e *env) qState() *qState {
	e.popMu.Lock()
	defer e.popMu.Unlock()
	if e.q == nil {
		e.q = &qState{seeded: map[string]int{}}
	}
	return e.q
}

// seedOrders writes documents 0..n-1 of coll through the leader's
// POST /api/db/batch, qBatch per batch, 4 batches in flight, once per env.
func seedOrders(ctx context.Context, e *env, coll string, n int, logf func(string, ...any)) error {
	q := e.qState()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.seeded[coll] >= n {
		return nil
	}
	t0 := time.Now()
	batches := (n + qBatch - 1) / qBatch
	err := parallel(ctx, batches, 4, func(b int) error {
		body := edgebaseSeedBatch(coll, b*qBatch, min((b+1)*qBatch, n))
		var err error
		for attempt := 0; attempt < 3; attempt++ {
			if attempt > 0 {
				sleepCtx(ctx, time.Second)
			}
			if _, err = e.postAs(ctx, e.c.leader, "/api/db/batch", "batch", body); err == nil {
				return nil
			}
		}
		return fmt.Errorf("seed %s batch %d: %w", coll, b, err)
	})
	if err != nil {
		return err
	}
	q.seeded[coll] = n
	logf("bench: seeded %d documents of %s through /api/db/batch in %.1fs", n, coll, time.Since(t0).Seconds())
	return nil
}

// edgebaseSeedBatch is the POST /api/db/batch body that sets orders
// from..to-1 of coll.
func edgebaseSeedBatch(coll string, from, to int) []byte {
	type write struct {
		Op         string `json:"op"`
		Collection string `json:"collection"`
		Data       order  `json:"data"`
	}
	ws := make([]write, 0, to-from)
	for i := from; i < to; i++ {
		ws = append(ws, write{Op: "set", Collection: coll + "/" + qDocID(i), Data: genOrder(i)})
	}
	b, _ := json.Marshal(map[string]any{"writes": ws}) // plain structs: cannot fail
	return b
}

// qIndexBody is the index Q1 declares: [status, createdAt desc] on orders.
func qIndexBody() []byte {
	return []byte(`{"indexes":[{"collection":"` + qIndexedColl + `","fields":[{"field":"status"},{"field":"createdAt","direction":"desc"}]}]}`)
}

// declareQueryIndex declares Q1's index through the leader and waits until
// every node's GET /api/db/indexes says it is ready.
func declareQueryIndex(ctx context.Context, e *env, logf func(string, ...any)) error {
	t0 := time.Now()
	if _, err := e.send(ctx, e.c.leader, http.MethodPut, "/api/db/indexes", qIndexBody()); err != nil {
		return fmt.Errorf("PUT /api/db/indexes: %w", err)
	}
	for _, n := range e.c.nodes {
		err := proctest.Poll(ctx, 10*time.Minute, func() error {
			b, err := e.send(ctx, n, http.MethodGet, "/api/db/indexes", nil)
			if err != nil {
				return err
			}
			return indexReady(b, qIndexedColl)
		})
		if err != nil {
			return fmt.Errorf("index on %s: %w", n.id, err)
		}
	}
	logf("bench: index [status, createdAt desc] on %s ready on every node %.1fs after its declaration", qIndexedColl, time.Since(t0).Seconds())
	return nil
}

// indexReady checks a GET /api/db/indexes answer for a ready index of coll.
func indexReady(body []byte, coll string) error {
	var r struct {
		Indexes []struct {
			Collection string `json:"collection"`
			State      string `json:"state"`
		} `json:"indexes"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("GET /api/db/indexes: unreadable answer: %w", err)
	}
	for _, ix := range r.Indexes {
		if ix.Collection == coll {
			if ix.State == "ready" {
				return nil
			}
			return fmt.Errorf("index on %s is %q", coll, ix.State)
		}
	}
	return fmt.Errorf("no index on %s in %s", coll, body)
}

// send makes one request with the owner's token and returns the body of a
// 2xx answer.
func (e *env) send(ctx context.Context, n *benchNode, method, route string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, e.o.reqTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, n.url+route, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+e.pr.Token)
	resp, err := e.hc.Do(req)
	if err != nil {
		return nil, transportError(method+" "+route, err)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	_ = resp.Body.Close()
	if err != nil {
		return nil, transportError(method+" "+route, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, statusError(method+" "+route, resp, b)
	}
	return b, nil
}

// qQueryBody is the query of Q1 and Q2 on coll for one status.
func qQueryBody(coll, status string) []byte {
	return []byte(`{"collection":"` + coll + `","where":[{"field":"status","op":"==","value":"` + status +
		`"}],"orderBy":[{"field":"createdAt","direction":"desc"}],"limit":` + strconv.Itoa(qLimit) + `}`)
}

// queryOp runs the query on coll for client c's operation i through a node
// (round-robin) and checks the answer.
func (e *env) queryOp(ctx context.Context, coll string, c, i int) error {
	status := qStatus(c, i)
	b, err := e.send(ctx, e.node(c), http.MethodPost, "/api/db/query", qQueryBody(coll, status))
	if err != nil {
		return err
	}
	return checkEdgebaseQuery(b, status, qLimit)
}

// checkEdgebaseQuery checks a POST /api/db/query answer: want documents,
// each with the status, newest first.
func checkEdgebaseQuery(body []byte, status string, want int) error {
	var r struct {
		Documents []struct {
			Data order `json:"data"`
		} `json:"documents"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return &opError{kind: "query: unreadable answer"}
	}
	got := make([]order, len(r.Documents))
	for i, d := range r.Documents {
		got[i] = d.Data
	}
	return checkOrders("query", got, status, want)
}

// checkOrders checks one page of either system: want orders, each with the
// status, createdAt not increasing.
func checkOrders(label string, got []order, status string, want int) error {
	if len(got) != want {
		return &opError{kind: fmt.Sprintf("%s: %d documents, want %d", label, len(got), want)}
	}
	for i, o := range got {
		if o.Status != status {
			return &opError{kind: label + ": a document of another status"}
		}
		if i > 0 && o.CreatedAt > got[i-1].CreatedAt {
			return &opError{kind: label + ": not newest first"}
		}
	}
	return nil
}

// prepareQ1 seeds --q1-docs orders and declares the index.
func prepareQ1(ctx context.Context, e *env) error {
	logf := e.logf()
	if err := seedOrders(ctx, e, qIndexedColl, e.o.q1Docs, logf); err != nil {
		return err
	}
	return declareQueryIndex(ctx, e, logf)
}

// prepareQ2 seeds --q2-docs orders in the collection without an index.
func prepareQ2(ctx context.Context, e *env) error {
	return seedOrders(ctx, e, qUnindexedColl, e.o.q2Docs, e.logf())
}

// logf is the env's progress log (stderr), or nothing.
func (e *env) logf() func(string, ...any) {
	if e.log != nil {
		return e.log
	}
	return func(string, ...any) {}
}

// runFor runs op with clients concurrent clients for d: a run of a
// fixed duration, so that both systems of a comparison are measured for the
// same time. Operations cut by the end of the run are neither results nor
// errors; an interrupt (ctx) ends the run early.
func runFor(ctx context.Context, clients int, d time.Duration, op func(ctx context.Context, c, i int) error) (runResult, *histogram, map[string]int, map[string]int) {
	rctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	hs := make([]histogram, clients)
	kinds := make([]map[string]int, clients)
	var wg sync.WaitGroup
	start := time.Now()
	for c := range clients {
		kinds[c] = map[string]int{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; rctx.Err() == nil; i++ {
				t0 := time.Now()
				err := op(rctx, c, i)
				dur := time.Since(t0)
				switch {
				case err == nil:
					hs[c].add(dur)
				case rctx.Err() != nil:
				default:
					var oe *opError
					if errors.As(err, &oe) {
						kinds[c][oe.kind]++
					} else {
						kinds[c][err.Error()]++
					}
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	var all histogram
	merged := map[string]int{}
	rr := runResult{WallSeconds: round(wall.Seconds(), 3)}
	for c := range clients {
		all.merge(&hs[c])
		for k, v := range kinds[c] {
			merged[k] += v
			rr.Errors += v
		}
	}
	rr.Ops = all.count()
	rr.OpsPerSec = round(throughput(rr.Ops, wall), 1)
	return rr, &all, merged, nil
}

// runQuery is the Run of Q1 and Q2 on edgebase: --query-duration of queries.
func runQuery(coll string) func(ctx context.Context, e *env, s *scenario, ops int) (runResult, *histogram, map[string]int, map[string]int) {
	return func(ctx context.Context, e *env, s *scenario, _ int) (runResult, *histogram, map[string]int, map[string]int) {
		return runFor(ctx, s.Clients(e.o), e.o.queryDuration, func(ctx context.Context, c, i int) error {
			return e.queryOp(ctx, coll, c, i)
		})
	}
}
