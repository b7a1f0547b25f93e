package raftstore

// A removed node must never come back with its old state: it would start
// Raft with a configuration that still names it, campaign, and serve stale
// local reads. Three things stop it:
//
//   - the leader that removes a member records a tombstone, RemovedPath(id),
//     in the replicated tree, in the entry after the configuration change
//     committed (so a tombstone always means "the removal committed");
//   - a member answers, behind the cluster secret, whether a node is still a
//     member: "removed" only when, after a strong read, the node is absent
//     from its configuration AND has a tombstone (a definite answer from a
//     live member; anything else is "don't know");
//   - a node asks that question at start when it has state, and while
//     running when its own configuration no longer names it or it has been
//     cut off from every leader for a while. Told it was removed, it writes
//     RemovedMarkerFile into its data dir, stops Raft and refuses writes and
//     reads with a *RemovedError; with the marker present it refuses to
//     start at all.
//
// Joining again needs a wiped data dir; the leader's Join clears the
// tombstone. A node that cannot reach anyone, or gets no definite answer,
// carries on as before: only a live member's answer counts.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// RemovedMarkerFile is written into the data dir of a node that learned it
// was removed; its presence makes the node refuse to start.
const RemovedMarkerFile = "REMOVED"

// RemovedPath is where the leader records that a member was removed.
func RemovedPath(id string) string { return SystemPrefix + "/removed/" + id }

// Removal records when a node was removed from the cluster.
type Removal struct {
	ID string    `json:"id"`
	At time.Time `json:"removedAt"`
}

// RemovedError is ErrRemoved with the node and the time of its removal.
type RemovedError struct{ Removal Removal }

func (e *RemovedError) Error() string {
	at := "an unknown time"
	if !e.Removal.At.IsZero() {
		at = e.Removal.At.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("node %s was removed from the cluster at %s; wipe --data-dir to join again as a new member", e.Removal.ID, at)
}

// Unwrap makes errors.Is(err, ErrRemoved) hold.
func (e *RemovedError) Unwrap() error { return ErrRemoved }

const (
	// startCheckBudget bounds the membership question at start: peers that
	// are down or partitioned delay a start by at most this much.
	startCheckBudget = 3 * time.Second
	// memberAnswerTimeout bounds a member's strong read when it answers.
	memberAnswerTimeout = 2 * time.Second
	// cutOffAfter is how long a member may go without a leader before it
	// asks whether it is still a member (it may have been removed while
	// partitioned, and would never hear of it from Raft).
	cutOffAfter = 10 * time.Second
	// askEveryOut and askEveryCutOff pace the question while running.
	askEveryOut    = 2 * time.Second
	askEveryCutOff = 10 * time.Second
)

// markerFile is the content of RemovedMarkerFile.
type markerFile struct {
	Removal
	DetectedAt time.Time `json:"detectedAt"`
}

// refuseIfRemoved fails when dir holds a removal marker.
func refuseIfRemoved(dir, id string) error {
	b, err := os.ReadFile(filepath.Join(dir, RemovedMarkerFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: read %s: %v; wipe --data-dir to join again as a new member", ErrRemoved, RemovedMarkerFile, err)
	}
	var m markerFile
	if err := json.Unmarshal(b, &m); err != nil || m.ID == "" {
		// Unreadable, but there: the node was still removed.
		return &RemovedError{Removal: Removal{ID: id}}
	}
	return &RemovedError{Removal: m.Removal}
}

// writeRemovedMarker writes the marker durably (temp file, fsync, rename).
func writeRemovedMarker(dir string, rm Removal, now time.Time) error {
	b, err := json.Marshal(markerFile{Removal: rm, DetectedAt: now.UTC()})
	if err != nil {
		return fmt.Errorf("encode removal marker: %w", err)
	}
	p := filepath.Join(dir, RemovedMarkerFile)
	tmp := p + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write removal marker: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		return fmt.Errorf("write removal marker: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// Removed returns a *RemovedError once this node has learned it was removed
// from the cluster, and nil while it is a member.
func (s *Store) Removed() error { return s.removedErr() }

func (s *Store) removedErr() error {
	if rm := s.removed.Load(); rm != nil {
		return &RemovedError{Removal: *rm}
	}
	return nil
}

// markRemoved makes this node stop serving as a member, for good.
func (s *Store) markRemoved(rm Removal) {
	if !s.removing.CompareAndSwap(false, true) {
		return
	}
	// The marker is on disk before Removed reports the removal, so whoever
	// sees the removal finds the marker too.
	if err := writeRemovedMarker(s.cfg.Dir, rm, time.Now()); err != nil {
		s.logger.Error("could not write the removal marker", "err", err)
	}
	s.removed.Store(&rm)
	s.logger.Error("this node was removed from the cluster: it no longer serves writes or reads and will refuse to start with this data dir; wipe the data dir to join again as a new member",
		"removedAt", rm.At.UTC().Format(time.RFC3339), "dataDir", s.cfg.Dir)
	if l := s.leader.Swap(nil); l != nil {
		l.cancel()
	}
	// A removed node must not campaign with its stale configuration.
	if err := s.raft.Shutdown().Error(); err != nil {
		s.logger.Warn("raft shutdown after removal", "err", err)
	}
}

// checkMembershipAtStart asks the members, before Raft starts, whether this
// node (which has state) is still one of them.
func (s *Store) checkMembershipAtStart() error {
	peers := s.peerURLs()
	if len(peers) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), startCheckBudget)
	defer cancel()
	member, rm := s.askMembership(ctx, peers)
	switch {
	case rm != nil:
		if err := writeRemovedMarker(s.cfg.Dir, *rm, time.Now()); err != nil {
			s.logger.Error("could not write the removal marker", "err", err)
		}
		s.logger.Error("this node was removed from the cluster while it was away; refusing to start", "removedAt", rm.At.UTC().Format(time.RFC3339))
		return &RemovedError{Removal: *rm}
	case member:
		s.logger.Debug("membership confirmed by the cluster")
	default:
		s.logger.Info("no member confirmed this node's membership (peers unreachable or undecided); starting with the local configuration")
	}
	return nil
}

// watchMembership asks the cluster whether this node is still a member when
// its own configuration no longer names it (after it did), or when it has
// been without a leader for cutOffAfter while the configuration names it.
func (s *Store) watchMembership() {
	defer s.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	lastLeader := time.Now()
	var lastAsk time.Time
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		if s.removed.Load() != nil {
			return
		}
		if s.LeaderID() != "" {
			lastLeader = time.Now()
		}
		servers, err := s.configuration()
		if err != nil {
			continue
		}
		in := hasServer(servers, s.cfg.NodeID)
		if in {
			s.wasMember.Store(true)
		}
		// A joining node first replays older configurations that do not name
		// it yet: only one that was a member can have been removed.
		out := s.wasMember.Load() && len(servers) > 0 && !in
		cutOff := in && time.Since(lastLeader) > cutOffAfter
		every := askEveryCutOff
		if out {
			every = askEveryOut
		}
		if !(out || cutOff) || time.Since(lastAsk) < every {
			continue
		}
		lastAsk = time.Now()
		actx, acancel := context.WithTimeout(context.Background(), startCheckBudget)
		done := make(chan struct{})
		go func() {
			select {
			case <-s.stop:
				acancel()
			case <-done:
			}
		}()
		_, rm := s.askMembership(actx, s.peerURLs())
		close(done)
		acancel()
		if rm != nil {
			s.markRemoved(*rm)
			return
		}
	}
}

func (s *Store) configuration() ([]raft.Server, error) {
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	return f.Configuration().Servers, nil
}

func hasServer(servers []raft.Server, id string) bool {
	for _, srv := range servers {
		if string(srv.ID) == id {
			return true
		}
	}
	return false
}

// peerURLs are the members to ask: the configured peers (the join list) and
// every other node whose record this node's tree holds.
func (s *Store) peerURLs() []string {
	self := strings.TrimRight(s.cfg.HTTPAdvertise, "/")
	seen := map[string]bool{self: true}
	var out []string
	add := func(u string) {
		u = strings.TrimRight(strings.TrimSpace(u), "/")
		if u != "" && !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	for _, u := range s.cfg.Peers {
		add(u)
	}
	after := ""
	for {
		docs, next, err := s.List(SystemPrefix+"/nodes", after, 100)
		if err != nil {
			s.logger.Debug("list node records", "err", err)
			break
		}
		for _, d := range docs {
			var rec NodeRecord
			if json.Unmarshal(d.Data, &rec) == nil && rec.ID != s.cfg.NodeID {
				add(rec.HTTPAddr)
			}
		}
		if next == "" {
			break
		}
		after = next
	}
	return out
}

// membershipAnswer is a member's answer about one node.
type membershipAnswer struct {
	ID     string `json:"id"`
	Member bool   `json:"member"`
	// Removed is the tombstone, given only when the node is not a member.
	Removed *Removal `json:"removed,omitempty"`
	From    string   `json:"from"`
}

// askMembership asks every peer at once and returns the first definite
// answer: member, or removed (rm non-nil). Neither means nobody knew.
func (s *Store) askMembership(ctx context.Context, peers []string) (member bool, rm *Removal) {
	if len(peers) == 0 {
		return false, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	body, _ := json.Marshal(map[string]string{"id": s.cfg.NodeID})
	answers := make(chan *membershipAnswer, len(peers))
	for _, u := range peers {
		go func(u string) {
			var a membershipAnswer
			if _, err := s.internalCall(ctx, u, "membership", body, &a); err != nil {
				s.logger.Debug("membership question unanswered", "peer", u, "err", err)
				answers <- nil
				return
			}
			answers <- &a
		}(u)
	}
	for range peers {
		a := <-answers
		switch {
		case a == nil:
		case a.Member:
			return true, nil
		case a.Removed != nil:
			r := *a.Removed
			r.ID = s.cfg.NodeID
			s.logger.Info("a member says this node was removed", "from", a.From, "removedAt", r.At.UTC().Format(time.RFC3339))
			return false, &r
		}
	}
	return false, nil
}

// membershipOf answers for node id after a strong read, so that the
// configuration and the tombstones seen include every committed change.
func (s *Store) membershipOf(ctx context.Context, id string) (*membershipAnswer, error) {
	if err := s.removedErr(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, memberAnswerTimeout)
	defer cancel()
	if err := s.WaitRead(ctx, Strong, 0); err != nil {
		return nil, err
	}
	servers, err := s.configuration()
	if err != nil {
		return nil, err
	}
	a := &membershipAnswer{ID: id, From: s.cfg.NodeID}
	if !hasServer(servers, s.cfg.NodeID) {
		return nil, errors.New("the answering node is not a member itself")
	}
	if hasServer(servers, id) {
		a.Member = true
		return a, nil
	}
	doc, err := s.Get(RemovedPath(id))
	if err != nil {
		return nil, err
	}
	if doc != nil {
		var rm Removal
		if err := json.Unmarshal(doc.Data, &rm); err != nil {
			return nil, fmt.Errorf("decode removal record of %s: %w", id, err)
		}
		a.Removed = &rm
	}
	return a, nil
}

func (s *Store) serveMembership(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil || req.ID == "" {
		internalError(w, "bad membership request", http.StatusBadRequest)
		return
	}
	a, err := s.membershipOf(r.Context(), req.ID)
	if err != nil {
		internalError(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, a)
}

// recordRemoval writes the tombstone of a removed member and deletes its
// node record, in one entry after the configuration change committed.
func (s *Store) recordRemoval(ctx context.Context, id string) error {
	now := time.Now()
	data, err := json.Marshal(Removal{ID: id, At: now.UTC()})
	if err != nil {
		return fmt.Errorf("encode removal of %s: %w", id, err)
	}
	res, err := s.Txn(ctx, &Txn{Time: now.UnixNano(), Ops: []Op{
		{Kind: OpPut, Path: RemovedPath(id), Data: data},
		{Kind: OpDelete, Path: NodeRecordPath(id), IfExists: true},
	}})
	if err != nil {
		return fmt.Errorf("record removal of %s: %w", id, err)
	}
	if !res.OK() {
		return fmt.Errorf("record removal of %s: %s", id, res.Err)
	}
	return nil
}

// clearRemoval deletes a tombstone when a node joins again (wiped, as a new
// member under the same id).
func (s *Store) clearRemoval(ctx context.Context, id string) error {
	res, err := s.Txn(ctx, &Txn{Time: time.Now().UnixNano(), Ops: []Op{{Kind: OpDelete, Path: RemovedPath(id), IfExists: true}}})
	if err != nil {
		return fmt.Errorf("clear removal record of %s: %w", id, err)
	}
	if !res.OK() {
		return fmt.Errorf("clear removal record of %s: %s", id, res.Err)
	}
	return nil
}

// isUnknownNodeBody recognises the internal remove endpoint's 404.
func isUnknownNodeBody(b []byte) bool { return internalMessage(b) == ErrUnknownNode.Error() }

// internalMessage is the message of an internal endpoint's refusal: the
// JSON error shape's, or the plain text earlier binaries answered.
func internalMessage(b []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	return strings.TrimSpace(string(b))
}
