package proctest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Response is a whole HTTP answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r *Response) String() string {
	return fmt.Sprintf("%d %s", r.Status, bytes.TrimSpace(r.Body))
}

// DoJSON sends body (nil: none) as JSON and reads the whole answer (at most
// 16 MiB), within timeout and ctx.
func DoJSON(ctx context.Context, client *http.Client, timeout time.Duration, method, url string, headers map[string]string, body any) (*Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read body: %w", method, url, err)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// Member is one node of GET /admin/cluster.
type Member struct {
	ID           string `json:"id"`
	HTTPAddr     string `json:"httpAddr"`
	RaftAddr     string `json:"raftAddr"`
	Voter        bool   `json:"voter"`
	State        string `json:"state"`
	AppliedIndex uint64 `json:"appliedIndex"`
}

// ClusterStatus is the answer of GET /admin/cluster.
type ClusterStatus struct {
	Leader string   `json:"leader"`
	Nodes  []Member `json:"nodes"`
}

// Node is the member with that id, nil if there is none.
func (s *ClusterStatus) Node(id string) *Member {
	for i := range s.Nodes {
		if s.Nodes[i].ID == id {
			return &s.Nodes[i]
		}
	}
	return nil
}

// Healthy checks: voters voters all reachable (leader or follower), a known
// leader among them, and (when notLeader is set) that leader is not
// notLeader.
func (s *ClusterStatus) Healthy(voters int, notLeader string) error {
	n, leaderSeen := 0, false
	for _, m := range s.Nodes {
		if !m.Voter {
			continue
		}
		n++
		if m.State != "leader" && m.State != "follower" {
			return fmt.Errorf("member %s is %q: %+v", m.ID, m.State, *s)
		}
		leaderSeen = leaderSeen || m.ID == s.Leader
	}
	if n != voters {
		return fmt.Errorf("want %d voters, have %d: %+v", voters, n, *s)
	}
	if s.Leader == "" || !leaderSeen {
		return fmt.Errorf("no leader among the voters: %+v", *s)
	}
	if notLeader != "" && s.Leader == notLeader {
		return fmt.Errorf("leader is still %s", notLeader)
	}
	return nil
}
