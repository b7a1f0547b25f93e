package node_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edgebase/edgebase/node/nodetest"
	"github.com/edgebase/edgebase/realtime/client"
)

// TestDisableEndsLiveSessions: an owner disables a user through the leader;
// the user's realtime connections on a follower and on an edge node end
// with 4001 session_ended (final: no reconnect), and a new connection is
// refused, while another user's connection on the same node stays up.
// Enabling the account lets the user sign in and connect again.
func TestDisableEndsLiveSessions(t *testing.T) {
	t.Parallel()
	c := nodetest.Start(t, nodetest.Options{Voters: 2, Edges: 1})
	leader := c.Leader(30 * time.Second)
	p := c.CreateProject(leader)
	key := map[string]string{"X-Project-Id": p.ID, "X-API-Key": p.APIKey}
	register := func(email string) (id, tok string) {
		t.Helper()
		var reg struct {
			Token string
			User  struct{ ID string }
		}
		if st := c.Do(leader, http.MethodPost, "/api/auth", key, map[string]string{"action": "register", "email": email, "password": "a long enough password"}, &reg); st != http.StatusCreated {
			t.Fatalf("register %s: %d", email, st)
		}
		return reg.User.ID, reg.Token
	}
	uid, tok := register("disabled-live@example.com")
	_, bystander := register("bystander-live@example.com")

	dial := func(i int, tok string) (*client.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		conn, err := client.Dial(ctx, client.Config{URL: c.Nodes[i].URL(), Token: tok, ProjectID: p.ID, APIKey: p.APIKey,
			Reconnect: true, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
		if err == nil {
			t.Cleanup(func() { _ = conn.CloseNow() })
		}
		return conn, err
	}
	nodes := c.Followers(leader) // the other voter and the edge node
	var victims, others []*client.Conn
	for _, i := range nodes {
		v, err := dial(i, tok)
		if err != nil {
			t.Fatalf("dial %s: %v", c.Nodes[i].ID, err)
		}
		o, err := dial(i, bystander)
		if err != nil {
			t.Fatalf("dial %s: %v", c.Nodes[i].ID, err)
		}
		victims, others = append(victims, v), append(others, o)
	}

	owner := map[string]string{"X-Project-Id": p.ID, "X-API-Key": p.APIKey, "Authorization": "Bearer " + p.OwnerToken}
	if st := c.Do(leader, http.MethodPost, "/api/auth/users/"+uid+"/disable", owner, nil, nil); st != http.StatusOK {
		t.Fatalf("disable: %d", st)
	}
	disabled := time.Now()
	for k, conn := range victims {
		name := c.Nodes[nodes[k]].ID
		select {
		case <-conn.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the disabled user's connection is open 10s after the disable", name)
		}
		err := conn.Err()
		var e *client.Error
		if websocket.CloseStatus(err) != 4001 || !errors.As(err, &e) || e.Code != "session_ended" {
			t.Errorf("%s: ended with %v (close %d), want 4001 session_ended", name, err, websocket.CloseStatus(err))
		}
		t.Logf("%s: the disabled user's connection closed %v after the disable", name, time.Since(disabled).Round(time.Millisecond))
	}
	for k, i := range nodes {
		if _, err := dial(i, tok); err == nil {
			t.Errorf("%s: a disabled user's token connects", c.Nodes[i].ID)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := others[k].Ping(ctx); err != nil {
			t.Errorf("%s: the other user's connection after the disable: %v", c.Nodes[i].ID, err)
		}
		cancel()
	}

	if st := c.Do(nodes[0], http.MethodPost, "/api/auth/users/"+uid+"/enable", owner, nil, nil); st != http.StatusOK {
		t.Fatalf("enable: %d", st)
	}
	var login struct{ Token string }
	if st := c.Do(nodes[len(nodes)-1], http.MethodPost, "/api/auth", key, map[string]string{"action": "login", "email": "disabled-live@example.com", "password": "a long enough password"}, &login); st != http.StatusOK {
		t.Fatalf("login after enable: %d", st)
	}
	if _, err := dial(nodes[0], login.Token); err != nil {
		t.Fatalf("connect after enable: %v", err)
	}
}
