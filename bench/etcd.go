package main

// etcd side of --compare: a cluster of Debian's etcd-server on loopback and
// a client for its v3 JSON gateway (grpc-gateway, served at /v3/... on the
// client port), HTTP + JSON like ours. Bytes fields (keys, values) travel
// base64-encoded; 64-bit integers travel as JSON strings.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/edgebase/edgebase/internal/proctest"
)

// etcdBin is where Debian's etcd-server package installs etcd.
const etcdBin = "/usr/bin/etcd"

// findEtcd returns the etcd binary: /usr/bin/etcd, else etcd on PATH.
func findEtcd() (string, error) {
	if _, err := os.Stat(etcdBin); err == nil {
		return etcdBin, nil
	}
	p, err := exec.LookPath("etcd")
	if err != nil {
		return "", fmt.Errorf("etcd not found (%s or PATH); install Debian's etcd-server: %w", etcdBin, err)
	}
	return p, nil
}

// startEtcd starts size etcd members on loopback under dir (one static
// --initial-cluster) and returns once each answers GET /health with
// {"health":"true"} and a leader is known. It reuses the cluster type: the
// members are benchNodes (pids for CPU and RSS, logs, stop).
func startEtcd(ctx context.Context, hc *http.Client, bin, dir string, size int) (c *cluster, err error) {
	c = &cluster{}
	defer c.stopOnError(&err)
	peers := make([]string, size)
	var initial []string
	for i := range size {
		cp, err := freePort()
		if err != nil {
			return c, err
		}
		pp, err := freePort()
		if err != nil {
			return c, err
		}
		id := fmt.Sprintf("e%d", i+1)
		peers[i] = fmt.Sprintf("http://127.0.0.1:%d", pp)
		initial = append(initial, id+"="+peers[i])
		c.nodes = append(c.nodes, &benchNode{id: id, url: fmt.Sprintf("http://127.0.0.1:%d", cp),
			dataDir: filepath.Join(dir, id), logPath: filepath.Join(dir, id+".log")})
	}
	token := "bench-" + randomHex(8)
	for i, n := range c.nodes {
		args := []string{
			"--name", n.id,
			"--data-dir", n.dataDir,
			"--listen-client-urls", n.url,
			"--advertise-client-urls", n.url,
			"--listen-peer-urls", peers[i],
			"--initial-advertise-peer-urls", peers[i],
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-token", token,
			"--initial-cluster-state", "new",
			"--logger", "zap",
			"--log-level", "warn",
		}
		if err := n.start(bin, args); err != nil {
			return c, err
		}
	}
	for _, n := range c.nodes {
		if err := waitEtcdHealthy(ctx, hc, n, 30*time.Second); err != nil {
			return c, err
		}
	}
	err = proctest.Poll(ctx, 30*time.Second, func() error {
		for _, n := range c.nodes {
			st, err := etcdStatus(ctx, hc, n.url)
			if err != nil {
				return err
			}
			if st.Leader != "" && st.Leader != "0" && st.Header.MemberID == st.Leader {
				c.leader, c.leaderKnown = n, true
				return nil
			}
		}
		return errors.New("no member reports itself leader")
	})
	return c, err
}

// waitEtcdHealthy polls GET /health until it says {"health":"true"}.
func waitEtcdHealthy(ctx context.Context, hc *http.Client, n *benchNode, total time.Duration) error {
	return proctest.Poll(ctx, total, func() error {
		if err := n.exitedWhileStarting("etcd "); err != nil {
			return err
		}
		r, err := call(ctx, hc, http.MethodGet, n.url+"/health", nil, nil)
		if err != nil {
			return fmt.Errorf("etcd %s /health: %w", n.id, err)
		}
		var h struct {
			Health string `json:"health"`
		}
		if r.status != http.StatusOK || json.Unmarshal(r.body, &h) != nil || h.Health != "true" {
			return fmt.Errorf("etcd %s /health: %s", n.id, r)
		}
		return nil
	})
}

// etcdStatusResp is the part of POST /v3/maintenance/status the bench reads.
type etcdStatusResp struct {
	Header struct {
		MemberID string `json:"member_id"`
	} `json:"header"`
	Leader           string `json:"leader"`
	RaftAppliedIndex string `json:"raftAppliedIndex"`
}

func etcdStatus(ctx context.Context, hc *http.Client, base string) (*etcdStatusResp, error) {
	r, err := call(ctx, hc, http.MethodPost, base+"/v3/maintenance/status", nil, map[string]any{})
	if err != nil {
		return nil, fmt.Errorf("etcd status %s: %w", base, err)
	}
	var st etcdStatusResp
	if r.status != http.StatusOK || json.Unmarshal(r.body, &st) != nil {
		return nil, fmt.Errorf("etcd status %s: %s", base, r)
	}
	return &st, nil
}

// settleEtcd waits (at most 10 s) until every member has applied the same
// raft index, as cluster.settle does for ours.
func settleEtcd(ctx context.Context, hc *http.Client, c *cluster) {
	_ = proctest.Poll(ctx, 10*time.Second, func() error {
		var first string
		for i, n := range c.nodes {
			st, err := etcdStatus(ctx, hc, n.url)
			if err != nil {
				return err
			}
			if i == 0 {
				first = st.RaftAppliedIndex
			} else if st.RaftAppliedIndex != first {
				return errors.New("members differ")
			}
		}
		return nil
	})
}

// ---- gateway requests ----

var b64 = base64.StdEncoding

// appendB64String appends s base64-encoded as a JSON string literal.
func appendB64String(b []byte, s []byte) []byte {
	b = append(b, '"')
	b = b64.AppendEncode(b, s)
	return append(b, '"')
}

// etcdPutBody is POST /v3/kv/put's request: {"key":b64,"value":b64}.
// value64 is the value already base64-encoded (the bench encodes its fixed
// value once).
func etcdPutBody(key string, value64 []byte) []byte {
	b := make([]byte, 0, len(value64)+b64.EncodedLen(len(key))+24)
	b = append(b, `{"key":`...)
	b = appendB64String(b, []byte(key))
	b = append(b, `,"value":"`...)
	b = append(b, value64...)
	return append(b, `"}`...)
}

// etcdRangeBody is POST /v3/kv/range's request for one key; serializable:
// answered from the member's own store (no read-index round trip).
func etcdRangeBody(key string, serializable bool) []byte {
	b := make([]byte, 0, b64.EncodedLen(len(key))+32)
	b = append(b, `{"key":`...)
	b = appendB64String(b, []byte(key))
	if serializable {
		b = append(b, `,"serializable":true`...)
	}
	return append(b, '}')
}

// prefixEnd is the range_end that makes a watch or range cover every key
// starting with prefix (etcd's clientv3.GetPrefixRangeEnd).
func prefixEnd(prefix string) []byte {
	end := []byte(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return []byte{0} // every key
}

// etcdWatchBody is POST /v3/watch's create_request for every key under prefix.
func etcdWatchBody(prefix string) []byte {
	b := []byte(`{"create_request":{"key":`)
	b = appendB64String(b, []byte(prefix))
	b = append(b, `,"range_end":`...)
	b = appendB64String(b, prefixEnd(prefix))
	return append(b, `}}`...)
}

// etcdHeader is the response header of every gateway answer.
type etcdHeader struct {
	Revision string `json:"revision"`
}

// etcdPost sends body to base+path and reads the answer; a non-200 answer
// is an opError named after path and status.
func etcdPost(ctx context.Context, hc *http.Client, timeout time.Duration, base, path string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, transportError("etcd "+path, err)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	if err != nil {
		return nil, transportError("etcd "+path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var eb struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(b, &eb)
		return nil, &opError{kind: fmt.Sprintf("etcd %s %d %s", path, resp.StatusCode, eb.Error), status: resp.StatusCode}
	}
	return b, nil
}

// etcdPut writes key = value (value64: base64) and returns the revision.
func etcdPut(ctx context.Context, hc *http.Client, timeout time.Duration, base, key string, value64 []byte) (int64, error) {
	b, err := etcdPost(ctx, hc, timeout, base, "/v3/kv/put", etcdPutBody(key, value64))
	if err != nil {
		return 0, err
	}
	var r struct {
		Header etcdHeader `json:"header"`
	}
	if json.Unmarshal(b, &r) != nil {
		return 0, &opError{kind: "etcd put: unreadable answer"}
	}
	rev, err := strconv.ParseInt(r.Header.Revision, 10, 64)
	if err != nil || rev <= 0 {
		return 0, &opError{kind: "etcd put: answer without revision"}
	}
	return rev, nil
}

// etcdKV is one key-value of a range answer or watch event.
type etcdKV struct {
	Key         []byte `json:"key"` // encoding/json decodes base64 into []byte
	Value       []byte `json:"value"`
	ModRevision string `json:"mod_revision"`
}

// etcdGet reads key (serializable: from the member's own store) and returns
// its value; a missing key is an error.
func etcdGet(ctx context.Context, hc *http.Client, timeout time.Duration, base, key string, serializable bool) ([]byte, error) {
	b, err := etcdPost(ctx, hc, timeout, base, "/v3/kv/range", etcdRangeBody(key, serializable))
	if err != nil {
		return nil, err
	}
	return parseRangeValue(b)
}

// parseRangeValue is the first value of a range answer.
func parseRangeValue(b []byte) ([]byte, error) {
	var r struct {
		Kvs []etcdKV `json:"kvs"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, &opError{kind: "etcd range: unreadable answer"}
	}
	if len(r.Kvs) == 0 {
		return nil, &opError{kind: "etcd range: key not found"}
	}
	return r.Kvs[0].Value, nil
}

// etcdWatchMsg is one message of the watch stream.
type etcdWatchMsg struct {
	Result *struct {
		Header   etcdHeader `json:"header"`
		Created  bool       `json:"created"`
		Canceled bool       `json:"canceled"`
		Events   []struct {
			Type string `json:"type"` // "PUT" is omitted (the zero value); "DELETE"
			KV   etcdKV `json:"kv"`
		} `json:"events"`
		CancelReason string `json:"cancel_reason"`
	} `json:"result"`
	Error *struct {
		Message string `json:"message"`
		HTTP    int    `json:"http_code"`
	} `json:"error"`
}

// etcdWatch is one open watch stream.
type etcdWatch struct {
	body   io.ReadCloser
	dec    *json.Decoder
	cancel context.CancelFunc
}

// openEtcdWatch opens POST /v3/watch on base for every key under prefix and
// returns once etcd has confirmed the watch (created). The stream lives
// until close or ctx ends.
func openEtcdWatch(ctx context.Context, hc *http.Client, base, prefix string) (*etcdWatch, error) {
	wctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(wctx, http.MethodPost, base+"/v3/watch", bytes.NewReader(etcdWatchBody(prefix)))
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("etcd watch: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		_ = resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("etcd watch: %d %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	w := &etcdWatch{body: resp.Body, dec: json.NewDecoder(resp.Body), cancel: cancel}
	// The first message confirms the watch; a timer bounds the wait.
	t := time.AfterFunc(30*time.Second, cancel)
	m, err := w.next()
	t.Stop()
	if err != nil {
		w.close()
		return nil, fmt.Errorf("etcd watch: waiting for created: %w", err)
	}
	if !m.Result.Created {
		w.close()
		return nil, errors.New("etcd watch: first message is not created")
	}
	return w, nil
}

// next reads the next message of the stream; an error message or a
// canceled watch is an error.
func (w *etcdWatch) next() (*etcdWatchMsg, error) {
	var m etcdWatchMsg
	if err := w.dec.Decode(&m); err != nil {
		return nil, err
	}
	return checkWatchMsg(&m)
}

func checkWatchMsg(m *etcdWatchMsg) (*etcdWatchMsg, error) {
	switch {
	case m.Error != nil:
		return nil, fmt.Errorf("etcd watch error %d: %s", m.Error.HTTP, m.Error.Message)
	case m.Result == nil:
		return nil, errors.New("etcd watch: message without result")
	case m.Result.Canceled:
		return nil, fmt.Errorf("etcd watch canceled: %s", m.Result.CancelReason)
	}
	return m, nil
}

func (w *etcdWatch) close() {
	w.cancel()
	_ = w.body.Close()
}
