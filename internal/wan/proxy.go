package wan

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/edgebase/edgebase/internal/proctest"
)

// portKind names a node's two ports.
type portKind string

const (
	kindRaft portKind = "raft"
	kindHTTP portKind = "http"
)

// link is one proxy: sources in region From reach node To's port Kind.
type link struct {
	From Region
	To   string // node id
	Kind portKind
}

// name is the toxiproxy name of the link's proxy.
func (l link) name() string { return fmt.Sprintf("%s-to-%s-%s", l.From, l.To, l.Kind) }

// toxiproxy is a client of the wanproxy's REST API.
type toxiproxy struct {
	base string // http://host:port
	hc   *http.Client
}

type proxyConfig struct {
	Name     string `json:"name"`
	Listen   string `json:"listen"`
	Upstream string `json:"upstream"`
	Enabled  bool   `json:"enabled"`
}

type latencyAttrs struct {
	Latency int64 `json:"latency"`
	Jitter  int64 `json:"jitter"`
}

type toxicConfig struct {
	Name       string       `json:"name"`
	Type       string       `json:"type"`
	Stream     string       `json:"stream"`
	Toxicity   float64      `json:"toxicity"`
	Attributes latencyAttrs `json:"attributes"`
}

// Toxic names: one latency toxic per direction of each proxy, and the
// handshake toxic (e2e/wanproxy's own type) after the upstream one.
const (
	toxicUp            = "latency_up"
	toxicDown          = "latency_down"
	toxicHandshake     = "handshake"
	toxicHandshakeType = "handshake"
)

// linkToxics are a link's toxics for the profile, in the order they must
// be added: the latency of each direction, then (unless FreeConnect) the
// handshake's round trip on the upstream one.
func linkToxics(p Profile, from, to Region) []toxicConfig {
	up, down, jitter := p.Latency(from, to)
	out := []toxicConfig{
		{Name: toxicUp, Type: "latency", Stream: "upstream", Toxicity: 1, Attributes: latencyAttrs{Latency: up, Jitter: jitter}},
		{Name: toxicDown, Type: "latency", Stream: "downstream", Toxicity: 1, Attributes: latencyAttrs{Latency: down, Jitter: jitter}},
	}
	if !p.FreeConnect {
		out = append(out, toxicConfig{Name: toxicHandshake, Type: toxicHandshakeType, Stream: "upstream", Toxicity: 1,
			Attributes: latencyAttrs{Latency: up + down, Jitter: 2 * jitter}})
	}
	return out
}

// do sends body as JSON to the API and checks the status.
func (t *toxiproxy) do(ctx context.Context, method, path string, body any, want ...int) (*proctest.Response, error) {
	r, err := proctest.DoJSON(ctx, t.hc, 20*time.Second, method, t.base+path, nil, body)
	if err != nil {
		return nil, fmt.Errorf("wan: toxiproxy %s %s: %w", method, path, err)
	}
	for _, w := range want {
		if r.Status == w {
			return r, nil
		}
	}
	return nil, fmt.Errorf("wan: toxiproxy %s %s: %s", method, path, r)
}

// populate creates (or replaces) the proxies, enabled.
func (t *toxiproxy) populate(ctx context.Context, proxies []proxyConfig) error {
	r, err := t.do(ctx, http.MethodPost, "/populate", proxies, http.StatusCreated)
	if err != nil {
		return err
	}
	var out struct {
		Proxies []proxyConfig `json:"proxies"`
	}
	if err := json.Unmarshal(r.Body, &out); err != nil {
		return fmt.Errorf("wan: toxiproxy /populate: %w", err)
	}
	if len(out.Proxies) != len(proxies) {
		return fmt.Errorf("wan: toxiproxy /populate made %d proxies of %d", len(out.Proxies), len(proxies))
	}
	return nil
}

func (t *toxiproxy) addToxic(ctx context.Context, proxy string, tc toxicConfig) error {
	_, err := t.do(ctx, http.MethodPost, "/proxies/"+proxy+"/toxics", tc, http.StatusOK)
	return err
}

func (t *toxiproxy) updateToxic(ctx context.Context, proxy string, tc toxicConfig) error {
	_, err := t.do(ctx, http.MethodPost, "/proxies/"+proxy+"/toxics/"+tc.Name,
		map[string]any{"attributes": tc.Attributes, "toxicity": tc.Toxicity}, http.StatusOK)
	return err
}

func (t *toxiproxy) setEnabled(ctx context.Context, proxy string, enabled bool) error {
	_, err := t.do(ctx, http.MethodPost, "/proxies/"+proxy, map[string]bool{"enabled": enabled}, http.StatusOK)
	return err
}
