package raftstore

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// SecretHeader carries the cluster secret on node-to-node HTTP calls.
const SecretHeader = "X-Edgebase-Cluster-Secret"

// InternalPrefix is where InternalHandler is mounted.
const InternalPrefix = "/internal/"

// coalescer shares read-index rounds among concurrent callers. A caller
// only joins a round that has not started yet, so the round's result is
// taken after the caller arrived: exactly what a read index needs. The
// pending round starts at once while fewer than max rounds are in flight, so
// a caller waits about one round (one round trip to the leader), not the rest
// of the round in flight and then its own; callers arriving while max rounds
// are in flight share the next one, which starts when one of them ends.
type coalescer struct {
	fn      func(context.Context) (uint64, error)
	max     int // rounds in flight at most (at least 1)
	mu      sync.Mutex
	pending *coalescedCall // not started yet: newcomers join it
	running int
}

type coalescedCall struct {
	done chan struct{}
	idx  uint64
	err  error
}

// maxReadIndexRounds is how many read-index rounds a node runs at once. Each
// costs the leader one heartbeat round (VerifyLeader) or one internal call:
// a few overlap so that a read never waits for a round that started before
// it, and beyond them reads share.
const maxReadIndexRounds = 4

// roundTimeout bounds one round (fn's own attempts are shorter).
const roundTimeout = 5 * time.Second

func newCoalescer(fn func(context.Context) (uint64, error)) *coalescer {
	return &coalescer{fn: fn, max: maxReadIndexRounds}
}

func (c *coalescer) do(ctx context.Context) (uint64, error) {
	c.mu.Lock()
	if c.pending == nil {
		c.pending = &coalescedCall{done: make(chan struct{})}
	}
	call := c.pending
	c.startLocked()
	c.mu.Unlock()
	select {
	case <-call.done:
		return call.idx, call.err
	case <-ctx.Done():
		return 0, ErrTimeout
	}
}

// startLocked starts the pending round if there is one and room for it.
func (c *coalescer) startLocked() {
	if c.pending == nil || c.running >= max(c.max, 1) {
		return
	}
	call := c.pending
	c.pending = nil
	c.running++
	go c.run(call)
}

func (c *coalescer) run(call *coalescedCall) {
	ctx, cancel := context.WithTimeout(context.Background(), roundTimeout)
	call.idx, call.err = c.fn(ctx)
	cancel()
	close(call.done)
	c.mu.Lock()
	c.running--
	c.startLocked()
	c.mu.Unlock()
}

// leaderURL returns the leader's HTTP base URL, or errRetry while none is known.
func (s *Store) leaderURL() (string, error) {
	id := s.LeaderID()
	if id == "" {
		return "", errRetry
	}
	if id == s.cfg.NodeID {
		return "", errRetry // we were elected between the check and now
	}
	u, err := s.nodeHTTPAddr(id)
	if err != nil {
		return "", errRetry
	}
	return u, nil
}

// internalCall posts body to the leader's internal endpoint and decodes the
// JSON answer into out. sent reports whether the request may have reached it.
func (s *Store) internalCall(ctx context.Context, base, endpoint string, body []byte, out any) (sent bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+InternalPrefix+endpoint, bytes.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("build internal request: %w", err)
	}
	req.Header.Set(SecretHeader, s.cfg.Secret)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := s.client.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return false, errRetry
		}
		return true, err
	}
	defer func() {
		// Read to the end (a little more at most) so that the connection
		// goes back to the pool instead of being closed.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
	}()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxEntrySize*2))
	if err != nil {
		return true, fmt.Errorf("read internal response: %w", err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		if err := json.Unmarshal(b, out); err != nil {
			return true, fmt.Errorf("decode internal response: %w", err)
		}
		return true, nil
	case http.StatusMisdirectedRequest:
		// The target was not leader and did nothing: safe to retry.
		return false, errRetry
	case http.StatusForbidden:
		return false, ErrForbidden
	case http.StatusNotFound:
		if isUnknownNodeBody(b) {
			return true, ErrUnknownNode
		}
		return true, fmt.Errorf("internal %s: status %d: %s", endpoint, resp.StatusCode, internalMessage(b))
	case http.StatusConflict:
		switch internalMessage(b) {
		case ErrLastVoter.Error():
			return true, ErrLastVoter
		case ErrNotVoter.Error():
			return true, ErrNotVoter
		case ErrNoOtherVoter.Error():
			return true, ErrNoOtherVoter
		}
		return true, fmt.Errorf("internal %s: status %d: %s", endpoint, resp.StatusCode, internalMessage(b))
	default:
		return true, fmt.Errorf("internal %s: status %d: %s", endpoint, resp.StatusCode, internalMessage(b))
	}
}

func (s *Store) forwardPropose(ctx context.Context, cmd []byte) (*TxnResult, error) {
	base, err := s.leaderURL()
	if err != nil {
		return nil, err
	}
	var res TxnResult
	sent, err := s.internalCall(ctx, base, "propose", cmd, &res)
	switch {
	case err == nil:
		return &res, nil
	case errors.Is(err, errRetry), errors.Is(err, ErrForbidden):
		return nil, err
	case !sent:
		return nil, err
	default:
		return nil, fmt.Errorf("%w: %v", ErrUnknownOutcome, err)
	}
}

// readIndexAttemptTimeout bounds one read-index request to the leader. Every
// strong read and every write on a follower waits for the one coalesced
// round in flight, so a round stuck on a leader that died without closing
// its connections (a crash: the dial or the request hangs) would stall them
// all for the round's full 5 s, even after a successor was elected. Asking
// is idempotent: an attempt that runs out is retried with the leader looked
// up again.
const readIndexAttemptTimeout = time.Second

// forwardReadIndex asks the leader for its read index once; errRetry when no
// leader is known or the target is not (yet) the leader.
func (s *Store) forwardReadIndex(ctx context.Context) (uint64, error) {
	base, err := s.leaderURL()
	if err != nil {
		return 0, err
	}
	var out struct {
		Index uint64 `json:"index"`
	}
	ctx, cancel := context.WithTimeout(ctx, readIndexAttemptTimeout)
	defer cancel()
	if _, err := s.internalCall(ctx, base, "readindex", nil, &out); err != nil {
		if errors.Is(err, errRetry) || errors.Is(err, ErrForbidden) {
			return 0, err
		}
		// The leader did not answer: it may be gone; look again.
		return 0, errRetry
	}
	return out.Index, nil
}

// JoinRequest asks the cluster to add a node.
type JoinRequest struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	HTTPAddr string `json:"httpAddr"`
	Voter    bool   `json:"voter"`
	// Readdress only updates the Raft address of a node that is already a
	// member (it came back on another address; readdress.go): its suffrage
	// stays, an id that is not a member is refused with ErrUnknownNode, and
	// a removal tombstone is never cleared by it.
	Readdress bool `json:"readdress,omitempty"`
	// TxnVersion is the newest Txn encoding the joiner reads. A leader
	// refuses to add a node that does not read this binary's newest
	// encoding (older binaries send less, or none): the log it would have to
	// apply may hold it.
	TxnVersion byte `json:"txnVersion,omitempty"`
}

// ErrJoinerTooOld refuses a join from a binary that cannot read this
// cluster's log.
var ErrJoinerTooOld = errors.New("the joining node's binary is older than the cluster's: it cannot read the newest txn encoding; run the same version on every node")

// Join adds a node to the configuration (as a voter or a non-voter), or with
// Readdress updates a member's Raft address. On a follower it is forwarded
// to the leader.
func (s *Store) Join(ctx context.Context, req JoinRequest) error {
	if req.ID == "" || req.RaftAddr == "" {
		return errors.New("join: id and raftAddr are required")
	}
	if err := s.removedErr(); err != nil {
		return err
	}
	if !req.Readdress && req.TxnVersion < txnVersionLatest {
		return fmt.Errorf("join %s: %w", req.ID, ErrJoinerTooOld)
	}
	if !s.IsLeader() {
		base, err := s.leaderURL()
		if err != nil {
			return ErrNoLeader
		}
		body, _ := json.Marshal(req)
		var out struct{}
		if _, err := s.internalCall(ctx, base, "join", body, &out); err != nil {
			return fmt.Errorf("forward join: %w", err)
		}
		return nil
	}
	if req.Readdress {
		_, err := s.readdressMember(req.ID, raft.ServerAddress(req.RaftAddr))
		return err
	}
	id, addr := raft.ServerID(req.ID), raft.ServerAddress(req.RaftAddr)
	var f raft.IndexFuture
	if req.Voter {
		f = s.raft.AddVoter(id, addr, 0, 10*time.Second)
	} else {
		f = s.raft.AddNonvoter(id, addr, 0, 10*time.Second)
	}
	if err := f.Error(); err != nil {
		return fmt.Errorf("add %s: %w", req.ID, err)
	}
	// A joiner has no state: if its id was removed before, this is a new
	// member under the old name, no longer a removed one.
	if err := s.clearRemoval(ctx, req.ID); err != nil {
		return err
	}
	s.logger.Info("node joined", "id", req.ID, "raft", req.RaftAddr, "voter", req.Voter)
	return nil
}

// JoinCluster asks the members at urls, in turn, to add this node, until one
// succeeds or ctx ends.
func (s *Store) JoinCluster(ctx context.Context, urls []string) error {
	req := JoinRequest{ID: s.cfg.NodeID, RaftAddr: string(s.transport.LocalAddr()), HTTPAddr: s.cfg.HTTPAdvertise, Voter: s.cfg.Voter,
		TxnVersion: txnVersionLatest}
	for {
		via, last := s.askMembers(ctx, urls, req)
		if last == nil {
			s.wasMember.Store(true)
			s.logger.Info("joined cluster", "via", via)
			return nil
		}
		s.logger.Warn("join attempt failed; retrying", "err", last)
		select {
		case <-ctx.Done():
			return fmt.Errorf("join cluster: %w", last)
		case <-time.After(time.Second):
		}
	}
}

// askMembers sends req to the join endpoint of the members at urls, in
// turn, until one accepts it; it returns that member's URL. A refusal with
// ErrUnknownNode is a definite answer and ends the round.
func (s *Store) askMembers(ctx context.Context, urls []string, req JoinRequest) (string, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return "", fmt.Errorf("encode join request: %w", err)
	}
	last := errors.New("no members to ask")
	for _, u := range urls {
		var out struct{}
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		_, err := s.internalCall(cctx, strings.TrimRight(u, "/"), "join", body, &out)
		cancel()
		if err == nil {
			return u, nil
		}
		if errors.Is(err, ErrUnknownNode) {
			return "", err
		}
		last = err
	}
	return "", last
}

// RemoveNode removes a member from the configuration, then records its
// tombstone and deletes its node record (membership.go). A removal whose
// last step failed is finished by calling it again: a node that is no longer
// in the configuration but still has a record is not "unknown".
func (s *Store) RemoveNode(ctx context.Context, id string) error {
	if err := s.removedErr(); err != nil {
		return err
	}
	if id == "" {
		return ErrUnknownNode
	}
	if !s.IsLeader() {
		base, err := s.leaderURL()
		if err != nil {
			return ErrNoLeader
		}
		body, _ := json.Marshal(map[string]string{"id": id})
		var out struct{}
		if _, err := s.internalCall(ctx, base, "remove", body, &out); err != nil {
			if errors.Is(err, errRetry) {
				return ErrNoLeader
			}
			return fmt.Errorf("forward remove: %w", err)
		}
		return nil
	}
	servers, err := s.configuration()
	if err != nil {
		return err
	}
	if onlyVoter(servers, id) {
		return ErrLastVoter
	}
	if id == s.cfg.NodeID {
		return s.removeSelf(ctx)
	}
	in, err := s.removeFromConfiguration(id)
	if err != nil {
		return err
	}
	if !in {
		if err := s.WaitRead(ctx, Strong, 0); err != nil {
			return err
		}
		rec, err := s.Get(NodeRecordPath(id))
		if err != nil {
			return err
		}
		if rec == nil {
			return ErrUnknownNode
		}
	}
	return s.recordRemoval(ctx, id)
}

// removeFromConfiguration removes id from the configuration when it is in
// it (reporting whether it was), under membershipMu so that a readdress
// (readdress.go) never re-adds a member whose removal it did not see.
func (s *Store) removeFromConfiguration(id string) (bool, error) {
	s.membershipMu.Lock()
	defer s.membershipMu.Unlock()
	servers, err := s.configuration()
	if err != nil {
		return false, err
	}
	if !hasServer(servers, id) {
		return false, nil
	}
	if onlyVoter(servers, id) {
		return true, ErrLastVoter
	}
	if err := s.raft.RemoveServer(raft.ServerID(id), 0, 10*time.Second).Error(); err != nil {
		return true, fmt.Errorf("remove %s: %w", id, err)
	}
	s.logger.Info("node removed from the configuration", "id", id)
	return true, nil
}

// onlyVoter reports whether id is a voter and no other server is: removing
// it would leave a configuration without a quorum.
func onlyVoter(servers []raft.Server, id string) bool {
	voters, target := 0, false
	for _, srv := range servers {
		if srv.Suffrage == raft.Voter {
			voters++
			if string(srv.ID) == id {
				target = true
			}
		}
	}
	return target && voters == 1
}

// removeSelf handles removing the leader itself: hand leadership over, then
// let the new leader remove us (removing ourselves directly would shut our
// Raft down before our record could be deleted).
func (s *Store) removeSelf(ctx context.Context) error {
	if err := s.TransferLeadership(); err != nil {
		return err
	}
	for {
		base, err := s.leaderURL()
		if err == nil {
			body, _ := json.Marshal(map[string]string{"id": s.cfg.NodeID})
			var out struct{}
			if _, err = s.internalCall(ctx, base, "remove", body, &out); err == nil {
				return nil
			}
		}
		if !errors.Is(err, errRetry) {
			return fmt.Errorf("forward removal of %s: %w", s.cfg.NodeID, err)
		}
		select {
		case <-ctx.Done():
			return ErrNoLeader
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// NodeStatus is one member as seen from this node.
type NodeStatus struct {
	ID           string `json:"id"`
	HTTPAddr     string `json:"httpAddr"`
	RaftAddr     string `json:"raftAddr"`
	Voter        bool   `json:"voter"`
	State        string `json:"state"`
	AppliedIndex uint64 `json:"appliedIndex"`
}

// ClusterStatus is the membership with each member's state.
type ClusterStatus struct {
	Leader string       `json:"leader"`
	Nodes  []NodeStatus `json:"nodes"`
}

type selfStatus struct {
	ID           string `json:"id"`
	State        string `json:"state"`
	AppliedIndex uint64 `json:"appliedIndex"`
}

func (s *Store) self() selfStatus {
	return selfStatus{ID: s.cfg.NodeID, State: strings.ToLower(s.raft.State().String()), AppliedIndex: s.AppliedIndex()}
}

// Status reports the configuration and asks each member for its state
// (members that do not answer within a second show as "unreachable").
func (s *Store) Status(ctx context.Context) (ClusterStatus, error) {
	if err := s.removedErr(); err != nil {
		return ClusterStatus{}, err
	}
	cf := s.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return ClusterStatus{}, fmt.Errorf("read configuration: %w", err)
	}
	st := ClusterStatus{Leader: s.LeaderID()}
	servers := cf.Configuration().Servers
	st.Nodes = make([]NodeStatus, len(servers))
	var wg sync.WaitGroup
	for i, srv := range servers {
		n := NodeStatus{ID: string(srv.ID), RaftAddr: string(srv.Address), Voter: srv.Suffrage == raft.Voter, State: "unreachable"}
		n.HTTPAddr, _ = s.nodeHTTPAddr(n.ID)
		st.Nodes[i] = n
		if n.ID == s.cfg.NodeID {
			me := s.self()
			st.Nodes[i].State, st.Nodes[i].AppliedIndex = me.State, me.AppliedIndex
			continue
		}
		if n.HTTPAddr == "" {
			continue
		}
		wg.Add(1)
		go func(i int, base string) {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			var me selfStatus
			if _, err := s.internalCall(cctx, base, "status", nil, &me); err == nil {
				st.Nodes[i].State, st.Nodes[i].AppliedIndex = me.State, me.AppliedIndex
			}
		}(i, n.HTTPAddr)
	}
	wg.Wait()
	sort.Slice(st.Nodes, func(a, b int) bool { return st.Nodes[a].ID < st.Nodes[b].ID })
	return st, nil
}

// InternalHandler serves the node-to-node endpoints under InternalPrefix:
// propose, readindex, join, remove, status and membership, all behind the
// cluster secret.
func (s *Store) InternalHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+InternalPrefix+"propose", func(w http.ResponseWriter, r *http.Request) {
		if !s.IsLeader() {
			internalError(w, "not leader", http.StatusMisdirectedRequest)
			return
		}
		cmd, err := io.ReadAll(io.LimitReader(r.Body, maxEntrySize+1))
		if err != nil || len(cmd) > maxEntrySize {
			internalError(w, "bad command", http.StatusBadRequest)
			return
		}
		res, err := s.applyLocal(r.Context(), cmd)
		switch {
		case errors.Is(err, errRetry):
			internalError(w, "not leader", http.StatusMisdirectedRequest)
		case err != nil:
			internalError(w, err.Error(), http.StatusServiceUnavailable)
		default:
			writeJSON(w, res)
		}
	})
	mux.HandleFunc("POST "+InternalPrefix+"readindex", func(w http.ResponseWriter, r *http.Request) {
		if !s.IsLeader() {
			internalError(w, "not leader", http.StatusMisdirectedRequest)
			return
		}
		idx, err := s.leaderReadIndex(r.Context())
		if err != nil {
			// Not (or no longer) an established leader: the caller retries.
			internalError(w, err.Error(), http.StatusMisdirectedRequest)
			return
		}
		writeJSON(w, map[string]uint64{"index": idx})
	})
	mux.HandleFunc("POST "+InternalPrefix+"join", func(w http.ResponseWriter, r *http.Request) {
		var req JoinRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
			internalError(w, "bad join request", http.StatusBadRequest)
			return
		}
		if err := s.Join(r.Context(), req); err != nil {
			if errors.Is(err, ErrUnknownNode) {
				// A readdress for a node that is not a member.
				internalError(w, ErrUnknownNode.Error(), http.StatusNotFound)
				return
			}
			if errors.Is(err, ErrJoinerTooOld) {
				internalError(w, err.Error(), http.StatusConflict)
				return
			}
			internalError(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, struct{}{})
	})
	mux.HandleFunc("POST "+InternalPrefix+"remove", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID string `json:"id"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
			internalError(w, "bad remove request", http.StatusBadRequest)
			return
		}
		if err := s.RemoveNode(r.Context(), req.ID); err != nil {
			if errors.Is(err, ErrUnknownNode) {
				internalError(w, ErrUnknownNode.Error(), http.StatusNotFound)
				return
			}
			if errors.Is(err, ErrLastVoter) {
				internalError(w, ErrLastVoter.Error(), http.StatusConflict)
				return
			}
			internalError(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, struct{}{})
	})
	mux.HandleFunc("POST "+InternalPrefix+"status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, s.self())
	})
	mux.HandleFunc("POST "+InternalPrefix+"membership", s.serveMembership)
	mux.HandleFunc("POST "+InternalPrefix+"transfer", s.serveTransfer)
	mux.HandleFunc(InternalPrefix, func(w http.ResponseWriter, r *http.Request) {
		internalError(w, "no such internal endpoint (or not with this method)", http.StatusNotFound)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get(SecretHeader)
		if s.cfg.Secret == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.Secret)) != 1 {
			internalError(w, "forbidden", http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// internalError answers a node-to-node call in the API's one error shape,
// {"error":{"code","message"}}; callers read the status (and log the text).
func internalError(w http.ResponseWriter, msg string, status int) {
	code := map[int]string{
		http.StatusBadRequest:         "invalid_argument",
		http.StatusForbidden:          "forbidden",
		http.StatusNotFound:           "not_found",
		http.StatusConflict:           "conflict",
		http.StatusMisdirectedRequest: "not_leader",
	}[status]
	if code == "" {
		code = "unavailable"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]map[string]string{"error": {"code": code, "message": msg}})
	_, _ = w.Write(append(b, '\n'))
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
