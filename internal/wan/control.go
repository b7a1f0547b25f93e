package wan

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/edgebase/edgebase/internal/proctest"
)

// Nodes is the topology, in start order.
func (c *Cluster) Nodes() []NodeSpec {
	out := make([]NodeSpec, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.spec
	}
	return out
}

// Spec is the node's spec; ok is false for an unknown id.
func (c *Cluster) Spec(node string) (NodeSpec, bool) {
	n, ok := c.byID[node]
	if !ok {
		return NodeSpec{}, false
	}
	return n.spec, true
}

// NodeLinksSimulated reports whether the nodes reach each other through
// the simulated WAN: false when the binary has no --connect-to, so that
// only clients (URL) see the latency.
func (c *Cluster) NodeLinksSimulated() bool { return c.connect }

// Profile is the network as it is now (SetJitter changes it).
func (c *Cluster) Profile() Profile {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cloneProfile(c.profile)
}

// url is the base URL of the (from, node, http) proxy ("" for an unknown
// node or region).
func (c *Cluster) url(from Region, node string) string {
	a, ok := c.listen[link{From: from, To: node, Kind: kindHTTP}]
	if !ok {
		return ""
	}
	return "http://" + a
}

// URL is the base URL a client in region from uses to reach node: its
// HTTP port through the proxy that adds the round trip between from and
// the node's region. "" for an unknown node or a region no node is in.
func (c *Cluster) URL(from Region, node string) string { return c.url(from, node) }

// DirectURL is node's own HTTP address, no proxy (for operator and test
// control, not for measuring). "" for an unknown node.
func (c *Cluster) DirectURL(node string) string {
	n, ok := c.byID[node]
	if !ok {
		return ""
	}
	return "http://" + n.httpAddr()
}

// Project is the project Start created: its id and API key.
func (c *Cluster) Project() (projectID, apiKey string) { return c.projectID, c.apiKey }

// OwnerToken is a session token of the project's owner (logged in by
// Start; it lasts the node's --session-ttl).
func (c *Cluster) OwnerToken() string { return c.ownerToken }

// OwnerHeaders authenticate a request as the project's owner: the project
// id, API key and owner's bearer token.
func (c *Cluster) OwnerHeaders() map[string]string {
	return map[string]string{"X-Project-Id": c.projectID, "X-API-Key": c.apiKey, "Authorization": "Bearer " + c.ownerToken}
}

// AdminToken is the operator token of every node.
func (c *Cluster) AdminToken() string { return c.adminToken }

// LogPath is the file holding node's output (every start of it); "" for an
// unknown node. The wanproxy's is wanproxy.log beside them.
func (c *Cluster) LogPath(node string) string {
	n, ok := c.byID[node]
	if !ok || n.proc == nil {
		return ""
	}
	return n.proc.LogPath
}

// LogTail is the last limit bytes of node's output.
func (c *Cluster) LogTail(node string, limit int64) string {
	n, ok := c.byID[node]
	if !ok || n.proc == nil {
		return ""
	}
	return n.proc.LogTail(limit)
}

// Running reports whether node's process runs.
func (c *Cluster) Running(node string) bool {
	n, ok := c.byID[node]
	return ok && n.proc != nil && n.proc.Running()
}

func (c *Cluster) node(id string) (*node, error) {
	n, ok := c.byID[id]
	if !ok || n.proc == nil {
		return nil, fmt.Errorf("wan: no node %q", id)
	}
	return n, nil
}

// Leader is the id of the leader as GET /admin/cluster of a running voter
// reports it (directly, no proxy), asking each running voter in turn and
// then the edges; an error when none knows one.
func (c *Cluster) Leader(ctx context.Context) (string, error) {
	var errs []error
	nodes := c.running()
	slices.SortStableFunc(nodes, func(a, b *node) int {
		switch {
		case a.spec.Edge == b.spec.Edge:
			return 0
		case b.spec.Edge:
			return -1
		default:
			return 1
		}
	})
	for _, n := range nodes {
		st, err := c.status(ctx, n.spec.ID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if st.Leader != "" {
			return st.Leader, nil
		}
		errs = append(errs, fmt.Errorf("%s knows no leader", n.spec.ID))
	}
	if len(errs) == 0 {
		return "", errors.New("wan: leader: no node is running")
	}
	return "", fmt.Errorf("wan: leader: %w", errors.Join(errs...))
}

// WaitLeader polls Leader until a node other than notLeader ("" for any)
// leads, at most total.
func (c *Cluster) WaitLeader(ctx context.Context, notLeader string, total time.Duration) (string, error) {
	var leader string
	err := proctest.Poll(ctx, total, func() error {
		l, err := c.Leader(ctx)
		if err != nil {
			return err
		}
		if l == notLeader {
			return fmt.Errorf("%s still leads", l)
		}
		leader = l
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("wan: no new leader: %w", err)
	}
	return leader, nil
}

// Kill kills node's process with SIGKILL and waits until it is gone.
func (c *Cluster) Kill(node string) error {
	n, err := c.node(node)
	if err != nil {
		return err
	}
	if err := n.proc.Kill9(); err != nil {
		return fmt.Errorf("wan: %w", err)
	}
	c.logf("wan: killed %s", node)
	return nil
}

// Restart starts node again with the same flags, data dir and ports and
// waits for its /readyz.
func (c *Cluster) Restart(ctx context.Context, node string) error {
	n, err := c.node(node)
	if err != nil {
		return err
	}
	if err := n.proc.Start(); err != nil {
		return fmt.Errorf("wan: restart: %w", err)
	}
	if err := c.waitReady(ctx, n); err != nil {
		return c.withLogs(err)
	}
	c.logf("wan: restarted %s", node)
	return nil
}

// Partition cuts every link between regions a and b, both ways: the
// proxies from a to the nodes in b and from b to the nodes in a stop
// listening and drop their connections (Raft, internal calls and clients
// alike). Heal undoes it.
func (c *Cluster) Partition(a, b Region) error {
	if a == b {
		return fmt.Errorf("wan: partition %s from itself", a)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n := 0
	for _, l := range c.links() {
		to := c.byID[l.To].spec.Region
		if !(l.From == a && to == b || l.From == b && to == a) || c.disabled[l] {
			continue
		}
		if err := c.tp.setEnabled(ctx, l.name(), false); err != nil {
			return err
		}
		c.disabled[l] = true
		n++
	}
	c.logf("wan: partitioned %s from %s (%d proxies)", a, b, n)
	return nil
}

// Heal undoes every Partition.
func (c *Cluster) Heal() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for l := range c.disabled {
		if err := c.tp.setEnabled(ctx, l.name(), true); err != nil {
			return err
		}
		delete(c.disabled, l)
	}
	c.logf("wan: healed")
	return nil
}

// SetJitter sets the jitter of every link to frac of its one-way latency.
func (c *Cluster) SetJitter(frac float64) error {
	if frac < 0 || frac >= 1 {
		return fmt.Errorf("wan: jitter %v is not in [0, 1)", frac)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := cloneProfile(c.profile)
	p.Jitter = frac
	for _, l := range c.links() {
		for _, tc := range linkToxics(p, l.From, c.byID[l.To].spec.Region) {
			if err := c.tp.updateToxic(ctx, l.name(), tc); err != nil {
				return err
			}
		}
	}
	c.profile = p
	c.logf("wan: jitter %v", frac)
	return nil
}

// Term is node's current Raft term, from its /metrics (directly).
func (c *Cluster) Term(ctx context.Context, node string) (uint64, error) {
	if _, err := c.node(node); err != nil {
		return 0, err
	}
	v, err := c.metric(ctx, node, "edgebase_raft_term")
	if err != nil {
		return 0, err
	}
	return uint64(v), nil
}

// AppliedIndex is node's applied Raft index (its revision), from its
// /metrics (directly).
func (c *Cluster) AppliedIndex(ctx context.Context, node string) (uint64, error) {
	if _, err := c.node(node); err != nil {
		return 0, err
	}
	v, err := c.metric(ctx, node, "edgebase_raft_applied_index")
	if err != nil {
		return 0, err
	}
	return uint64(v), nil
}
