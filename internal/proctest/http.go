package proctest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
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

// DoJSON sends body (nil: none) as JSON and reads the whole answer, within
// ctx and, unless it is 0, timeout.
func DoJSON(ctx context.Context, client *http.Client, timeout time.Duration, method, url string, headers map[string]string, body any) (*Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
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
	b, err := io.ReadAll(resp.Body)
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

// Project is a project made by CreateProject, with its owner's session.
type Project struct {
	ID, APIKey, OwnerID, Token string
}

// Headers authenticate as the owner, with the project's id and API key.
func (p Project) Headers() map[string]string {
	return map[string]string{"Authorization": "Bearer " + p.Token, "X-Project-Id": p.ID, "X-API-Key": p.APIKey}
}

// CreateProject runs `bin project create --json` against server, checks
// that it printed exactly one JSON object with the project's id, API key
// and owner, and logs the owner in through server.
func CreateProject(ctx context.Context, client *http.Client, bin, server, adminToken, name, email, password string) (Project, error) {
	cmd := exec.CommandContext(ctx, bin, "project", "create", "--server", server, "--admin-token", adminToken,
		"--name", name, "--owner-email", email, "--owner-password", password, "--json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return Project{}, fmt.Errorf("edgebase project create: %w\nstdout: %s\nstderr: %s", err, stdout.Bytes(), stderr.Bytes())
	}
	var created struct {
		ProjectID string `json:"projectId"`
		APIKey    string `json:"apiKey"`
		OwnerID   string `json:"ownerId"`
	}
	dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&created); err != nil {
		return Project{}, fmt.Errorf("project create --json: stdout %q is not one JSON object: %w", stdout.Bytes(), err)
	}
	if dec.More() {
		return Project{}, fmt.Errorf("project create --json: more than one JSON value on stdout: %q", stdout.Bytes())
	}
	if created.ProjectID == "" || created.APIKey == "" || created.OwnerID == "" {
		return Project{}, fmt.Errorf("project create --json: missing fields: %q", stdout.Bytes())
	}
	p := Project{ID: created.ProjectID, APIKey: created.APIKey, OwnerID: created.OwnerID}
	r, err := DoJSON(ctx, client, 20*time.Second, http.MethodPost, server+"/api/auth",
		map[string]string{"X-Project-Id": p.ID, "X-API-Key": p.APIKey},
		map[string]string{"action": "login", "email": email, "password": password})
	if err != nil {
		return Project{}, fmt.Errorf("owner login: %w", err)
	}
	var login struct {
		RequiresTotp bool   `json:"requiresTotp"`
		Token        string `json:"token"`
		User         struct {
			ID   string `json:"id"`
			Role string `json:"role"`
		} `json:"user"`
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &login) != nil || login.Token == "" || login.RequiresTotp {
		return Project{}, fmt.Errorf("owner login: %s", r)
	}
	if login.User.ID != p.OwnerID || login.User.Role != "owner" {
		return Project{}, fmt.Errorf("owner login: user %+v, want id %s role owner", login.User, p.OwnerID)
	}
	p.Token = login.Token
	return p, nil
}
