package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// serverAuthBound is how long a node lets one /api/auth request wait
// (hashing queue included) before it answers 503 (httpapi's authTimeout).
// Login requests wait longer than that, so that a node's overload answer
// reaches the bench instead of a client-side timeout.
const serverAuthBound = 15 * time.Second

// authTimeout is the timeout of one login or register request: --request-timeout,
// but at least 5 s past the node's own bound.
func (e *env) authTimeout() time.Duration {
	return max(e.o.reqTimeout, serverAuthBound+5*time.Second)
}

// benchAccount is one end-user account of the bench's project.
type benchAccount struct {
	email, password string
}

// account is the account operation i logs in as: all of them in turn.
func (e *env) account(i int) benchAccount {
	return e.accounts[i%len(e.accounts)]
}

// node is the node client c talks to in all-node scenarios: round-robin
// over every node, leader included.
func (e *env) node(c int) *benchNode {
	return e.c.nodes[c%len(e.c.nodes)]
}

// nodeNames is the Target of all-node scenarios (never "single node": on one
// node they run as designed, not as a stand-in for followers).
func (e *env) nodeNames() string {
	s := "node"
	if len(e.c.nodes) > 1 {
		s = "nodes"
	}
	for _, n := range e.c.nodes {
		s += " " + n.id
	}
	return s
}

// login logs a in through n with the correct password. Success is 200 with
// a session token; anything else is an opError (a 503 with Retry-After is
// marked as shed load).
func (e *env) login(ctx context.Context, n *benchNode, a benchAccount) error {
	b, err := e.authCall(ctx, n, "login", map[string]string{"action": "login", "email": a.email, "password": a.password}, http.StatusOK)
	if err != nil {
		return err
	}
	var res struct {
		RequiresTotp bool   `json:"requiresTotp"`
		Token        string `json:"token"`
	}
	if json.Unmarshal(b, &res) != nil || res.Token == "" || res.RequiresTotp {
		return &opError{kind: "login 200 without a token"}
	}
	return nil
}

// register creates a through n (201 with a token).
func (e *env) register(ctx context.Context, n *benchNode, a benchAccount, name string) error {
	b, err := e.authCall(ctx, n, "register", map[string]string{"action": "register", "email": a.email, "password": a.password, "name": name}, http.StatusCreated)
	if err != nil {
		return err
	}
	return needToken(b, "register 201 without a token")
}

// needToken checks that the answer b holds a token; kind names the error
// kind when it does not.
func needToken(b []byte, kind string) error {
	var res struct {
		Token string `json:"token"`
	}
	if json.Unmarshal(b, &res) != nil || res.Token == "" {
		return &opError{kind: kind}
	}
	return nil
}

// authCall POSTs body to n's /api/auth with the project's API key and
// returns the answer's body when its status is want. label names the
// action in error kinds.
func (e *env) authCall(ctx context.Context, n *benchNode, label string, body map[string]string, want int) ([]byte, error) {
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	ctx, cancel := context.WithTimeout(ctx, e.authTimeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url+"/api/auth", bytes.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Project-Id", e.pr.ID)
	req.Header.Set("X-API-Key", e.pr.APIKey)
	resp, err := e.hc.Do(req)
	if err != nil {
		return nil, transportError(label, err)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	if err != nil {
		return nil, transportError(label, err)
	}
	if resp.StatusCode != want {
		return nil, statusError(label, resp, b)
	}
	return b, nil
}

// registerAccounts creates the --accounts end-user accounts the login
// scenarios log in as (once per cluster), through the leader with up to
// --clients concurrent registrations. Passwords are long and random, so no
// common-password check or guess applies.
func registerAccounts(ctx context.Context, e *env) error {
	e.accMu.Lock()
	defer e.accMu.Unlock()
	if len(e.accounts) > 0 {
		return nil
	}
	accs := make([]benchAccount, e.o.accounts)
	for i := range accs {
		accs[i] = benchAccount{
			email:    "bench-user" + strconv.Itoa(i) + "@example.com",
			password: "bench " + randomHex(16),
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range min(e.o.clients, len(accs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(accs) || ctx.Err() != nil {
					return
				}
				var err error
				retried := false
				for attempt, shed := 0, 0; attempt < 3 && ctx.Err() == nil; {
					err = e.register(ctx, e.c.leader, accs[i], "bench user "+strconv.Itoa(i))
					var oe *opError
					isOp := errors.As(err, &oe)
					if err == nil || (retried && isOp && oe.status == http.StatusConflict) {
						// 409 on a retry: the earlier attempt (its answer lost) did register it.
						err = nil
						break
					}
					wait := time.Second
					if isOp && oe.shed && shed < 100 {
						// The node's hashing queue was full: nothing was
						// stored; wait as told without spending an attempt.
						shed++
						wait = max(oe.retryAfter, wait)
					} else {
						attempt++
					}
					retried = true
					select {
					case <-ctx.Done():
					case <-time.After(wait):
					}
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("register %s: %w", accs[i].email, err)
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	e.accounts = accs
	return nil
}

// retryAfter parses a Retry-After header in seconds (0: absent or a date,
// which the nodes never send).
func retryAfter(h http.Header) time.Duration {
	s, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || s < 0 {
		return 0
	}
	return time.Duration(s) * time.Second
}
