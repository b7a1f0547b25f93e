package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edgebase/edgebase/internal/proctest"
	"github.com/edgebase/edgebase/internal/wan"
)

// snapshotRestoredMsg is what raftstore logs when it restores a snapshot
// into the document tree (an edge node that installs the leader's).
const snapshotRestoredMsg = "restored snapshot"

// catchUp (9): cut ap from us and eu for --wan-duration while a writer in
// us writes at the leader (50 a second), heal, and time until e-ap's
// applied index reaches the leader's as it was at the heal.
func (e *wanEnv) catchUp(ctx context.Context, id, what string) *wanRow {
	t := time.Now()
	row := &wanRow{ID: id, Measurement: what, Regions: map[string]*wanCell{}}
	leader, rtt, err := e.leaderInfo(ctx)
	if err != nil {
		row.Failed = err.Error()
		return row
	}
	row.Leader = leader
	const edge = "e-ap"
	// e-ap has everything before the partition.
	if err := e.waitCaughtUp(ctx, edge, leader, 30*time.Second); err != nil {
		row.Failed = "before the partition: " + err.Error()
		return row
	}
	restoredBefore, logFile := e.countInNodeLog(edge, snapshotRestoredMsg)
	e.logf("%s partition ap from us and eu for %v...", id, e.o.partition)
	if err := e.c.Partition(wan.AP, wan.US); err != nil {
		row.Failed = "partition: " + err.Error()
		return row
	}
	if err := e.c.Partition(wan.AP, wan.EU); err != nil {
		_ = e.c.Heal()
		row.Failed = "partition: " + err.Error()
		return row
	}
	writes, werrs := 0, 0
	base := e.c.URL(wan.US, leader)
	tick := time.NewTicker(20 * time.Millisecond)
	end := time.After(e.o.partition)
loop:
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			break loop
		case <-end:
			break loop
		case <-tick.C:
		}
		if _, _, err := e.write(ctx, base, fmt.Sprintf("wan/part/%s/%d", id, i)); err != nil {
			werrs++
		} else {
			writes++
		}
	}
	tick.Stop()
	target, err := e.c.AppliedIndex(ctx, leader)
	if err != nil {
		_ = e.c.Heal()
		row.Failed = err.Error()
		return row
	}
	behind, _ := e.c.AppliedIndex(ctx, edge)
	t0 := time.Now()
	if err := e.c.Heal(); err != nil {
		row.Failed = "heal: " + err.Error()
		return row
	}
	err = proctest.Poll(ctx, 2*time.Minute, func() error {
		got, err := e.c.AppliedIndex(ctx, edge)
		if err != nil {
			return err
		}
		if got < target {
			return fmt.Errorf("%s applied %d of %d", edge, got, target)
		}
		return nil
	})
	d := time.Since(t0)
	var h histogram
	errs := 0
	if err != nil {
		errs = 1
		row.Notes = append(row.Notes, "catch-up: "+err.Error())
	} else {
		h.add(d)
	}
	row.Regions[string(wan.AP)] = cellFrom(&h, errs, rtt[wan.AP])
	restoredAfter, _ := e.countInNodeLog(edge, snapshotRestoredMsg)
	path := "log (no snapshot restored on " + edge + ")"
	switch {
	case logFile == "":
		path = "unknown (" + edge + "'s log cannot be read)"
	case restoredAfter > restoredBefore:
		path = fmt.Sprintf("snapshot (%s logged %q)", edge, snapshotRestoredMsg)
	}
	row.Notes = append(row.Notes,
		fmt.Sprintf("%d writes acknowledged during the %v partition (%d failed); %s was at %d, the leader at %d when healed", writes, e.o.partition, werrs, edge, behind, target),
		"catch-up path: "+path,
		"one sample, in the ap column: time from Heal to e-ap's applied index reaching the leader's")
	row.Seconds = round(time.Since(t).Seconds(), 1)
	return row
}

// waitCaughtUp polls until node's applied index reaches the leader's.
func (e *wanEnv) waitCaughtUp(ctx context.Context, node, leader string, total time.Duration) error {
	target, err := e.c.AppliedIndex(ctx, leader)
	if err != nil {
		return err
	}
	return proctest.Poll(ctx, total, func() error {
		got, err := e.c.AppliedIndex(ctx, node)
		if err != nil {
			return err
		}
		if got < target {
			return fmt.Errorf("%s applied %d of %d", node, got, target)
		}
		return nil
	})
}

// countInNodeLog counts the occurrences of msg in node's log and names the
// file; "" when it cannot be read.
func (e *wanEnv) countInNodeLog(node, msg string) (int, string) {
	f := e.c.LogPath(node)
	if f == "" {
		return 0, ""
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return 0, ""
	}
	return bytes.Count(b, []byte(msg)), f
}

// soak (10): jitter 0.20 on every link, a write every 200 ms from every
// region through its own edge for --wan-soak; no voter's term may change.
func (e *wanEnv) soak(ctx context.Context) *wanRow {
	t := time.Now()
	row := &wanRow{ID: "10", Measurement: fmt.Sprintf("soak %v at jitter ±20%%: write via own edge, a write every 200 ms per region", e.o.soak), Regions: map[string]*wanCell{}}
	leader, rtt, err := e.leaderInfo(ctx)
	if err != nil {
		row.Failed = err.Error()
		return row
	}
	row.Leader = leader
	before, err := e.terms(ctx)
	if err != nil {
		row.Failed = err.Error()
		return row
	}
	if err := e.c.SetJitter(0.20); err != nil {
		row.Failed = "set jitter: " + err.Error()
		return row
	}
	defer func() {
		if err := e.c.SetJitter(e.prof.Jitter); err != nil {
			e.logf("restore jitter: %v", err)
		}
	}()
	e.logf("10 soak for %v at jitter 0.20...", e.o.soak)
	sctx, cancel := context.WithTimeout(ctx, e.o.soak)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, r := range wanRegions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var h histogram
			errs := 0
			base := e.c.URL(r, edgeOf(r))
			for i := 0; sctx.Err() == nil; i++ {
				// Each write runs on ctx: one in flight when the soak
				// ends is finished, not cut.
				_, d, err := e.write(ctx, base, fmt.Sprintf("wan/soak/%s/%d", r, i))
				if err != nil {
					errs++
				} else {
					h.add(d)
				}
				sleepCtx(sctx, 200*time.Millisecond)
			}
			mu.Lock()
			row.Regions[string(r)] = cellFrom(&h, errs, rtt[r])
			mu.Unlock()
		}()
	}
	wg.Wait()
	after, err := e.terms(ctx)
	if err != nil {
		row.Failed = err.Error()
		return row
	}
	changed := electionsBetween(before, after)
	row.Notes = append(row.Notes, fmt.Sprintf("elections (voters whose term changed): %d (must be 0); terms before %v, after %v", len(changed), before, after))
	if len(changed) > 0 {
		row.Failed = "term changed on " + strings.Join(changed, ", ")
	}
	row.Seconds = round(time.Since(t).Seconds(), 1)
	return row
}

// terms reads every voter's Raft term.
func (e *wanEnv) terms(ctx context.Context) (map[string]uint64, error) {
	out := map[string]uint64{}
	var errs []error
	for _, v := range e.voters {
		t, err := e.c.Term(ctx, v)
		if err != nil {
			errs = append(errs, fmt.Errorf("term of %s: %w", v, err))
			continue
		}
		out[v] = t
	}
	return out, errors.Join(errs...)
}

// electionsBetween names the voters whose term differs between two reads
// (sorted as the voters are named).
func electionsBetween(before, after map[string]uint64) []string {
	var changed []string
	for v, t := range before {
		if a, ok := after[v]; ok && a != t {
			changed = append(changed, v)
		}
	}
	slices.Sort(changed)
	return changed
}
