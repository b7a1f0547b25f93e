package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"testing"
	"time"
)

// pocketBaseTestBin skips the test unless EDGEBASE_BENCH_POCKETBASE=1, and
// otherwise builds the PocketBase peer, giving a context of 5 minutes
// (cancel it when done) and the binary.
func pocketBaseTestBin(t *testing.T) (context.Context, context.CancelFunc, string) {
	t.Helper()
	if os.Getenv("EDGEBASE_BENCH_POCKETBASE") != "1" {
		t.Skip("skipping: set EDGEBASE_BENCH_POCKETBASE=1 to build and run the PocketBase peer")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	root, err := repoRoot(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	bin, err := buildPocketBase(ctx, root, t.Logf)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return ctx, cancel, bin
}

// TestPocketBaseIntegration builds the PocketBase peer (bench/pocketbase,
// its own module: the first build downloads PocketBase and takes about a
// minute), starts it, seeds it through /api/batch and queries it as the
// bench does. It runs only with EDGEBASE_BENCH_POCKETBASE=1, so that the
// repository's tests need neither PocketBase nor the module proxy.
func TestPocketBaseIntegration(t *testing.T) {
	ctx, cancel, bin := pocketBaseTestBin(t)
	defer cancel()
	o := &options{clients: 4, q1Docs: 600, q2Docs: 400, queryDuration: 300 * time.Millisecond,
		reqTimeout: 10 * time.Second, runTimeout: 30 * time.Second}
	hc := newHTTPClient(o)
	pe, err := startPocketBase(ctx, hc, bin, t.TempDir(), o, []byte(`"abcdefghijklmnop"`))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pe.stop)

	if err := pe.seed(ctx, qIndexedColl, 600, t.Logf); err != nil {
		t.Fatal(err)
	}
	for c := range 4 {
		if err := pe.queryOp(ctx, qIndexedColl, c, 0); err != nil {
			t.Errorf("query %s: %v", qStatus(c, 0), err)
		}
	}
	// The rule wants an authenticated caller: without a token the list
	// is empty (PocketBase filters, it does not refuse), which the check
	// catches; a superuser-only route refuses the end user.
	b, err := pe.do(ctx, http.MethodGet, pbQueryRoute(qIndexedColl, "open"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPBList(b, "open", qLimit); err == nil {
		t.Error("an anonymous list passed the check")
	}
	var oe *opError
	if _, err := pe.do(ctx, http.MethodPost, "/api/batch", pe.userToken, pbSeedBatch(qIndexedColl, 0, 1)); !errors.As(err, &oe) || oe.status/100 != 4 {
		t.Errorf("the end user seeding: %v, want a 4xx", err)
	}

	s, _ := findScenario("Q2")
	spec, ok := findCompareSpec("Q2", peerPocketBase)
	if !ok {
		t.Fatal("no Q2 against PocketBase")
	}
	sd, err := pe.side(ctx, spec, s, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	rr := sd.measure(ctx, 0)
	if rr.Ops == 0 || rr.Errors != 0 || rr.WallSeconds < 0.3 {
		t.Errorf("Q2 round on PocketBase: %+v %v", rr, sd.res.ErrorKinds)
	}
	if r := sd.finish(); len(r.Nodes) != 1 || r.Nodes[0].Unmeasured || r.Nodes[0].PeakRSSMiB <= 0 {
		t.Errorf("the peer's process is not measured: %+v", r.Nodes)
	}
}
