package wan

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgebase/edgebase/internal/proctest"
	"github.com/edgebase/edgebase/internal/testbin"
)

// startWanproxy runs the wanproxy binary of $EDGEBASE_TEST_BIN_DIR (the
// test skips without it) and returns a client of its API.
func startWanproxy(t *testing.T) *toxiproxy {
	t.Helper()
	dir := os.Getenv(testbin.DirEnv)
	bin := filepath.Join(dir, "wanproxy")
	if _, err := os.Stat(bin); dir == "" || err != nil {
		t.Skipf("needs the wanproxy binary of `make test-bins` in $%s (%q)", testbin.DirEnv, dir)
	}
	p := &proctest.Proc{ID: "wanproxy", Bin: bin, Args: []string{"-port", "0"}, LogPath: filepath.Join(t.TempDir(), "wanproxy.log")}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.KillIfRunning)
	var api string
	err := proctest.Poll(context.Background(), 10*time.Second, func() error {
		if api = apiAddr(p.LogPath); api == "" {
			return fmt.Errorf("no API address in %s", p.LogTail(1000))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return &toxiproxy{base: "http://" + api, hc: &http.Client{Timeout: 10 * time.Second}}
}

// timedGet is the time of a GET of url on a kept-alive connection.
func timedGet(hc *http.Client, url string) (time.Duration, error) {
	start := time.Now()
	resp, err := hc.Get(url)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %d", url, resp.StatusCode)
	}
	return time.Since(start), nil
}

// TestToxiproxyLink checks the proxies as the harness drives them: the
// latency toxics add the round trip, the handshake toxic one more on a new
// connection, disabling a proxy cuts it, enabling
// it again (on the same port) restores it, and an update changes the
// latency.
func TestToxiproxyLink(t *testing.T) {
	tp := startWanproxy(t)
	ctx := context.Background()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer srv.Close()
	var pts proctest.Ports
	defer pts.Release()
	port, err := pts.Get()
	if err != nil {
		t.Fatal(err)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	const name = "us-to-n1-http"
	if err := tp.populate(ctx, []proxyConfig{{Name: name, Listen: listen, Upstream: srv.Listener.Addr().String(), Enabled: true}}); err != nil {
		t.Fatal(err)
	}
	p := Profile{RTT: map[[2]Region]time.Duration{PairKey(US, AP): 150 * time.Millisecond}}
	for _, tc := range linkToxics(p, US, AP) {
		if err := tp.addToxic(ctx, name, tc); err != nil {
			t.Fatal(err)
		}
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	url := "http://" + listen + "/"
	d, err := timedGet(hc, url) // opens the connection: the handshake's round trip too
	if err != nil {
		t.Fatal(err)
	}
	if d < 295*time.Millisecond || d > 2*time.Second {
		t.Errorf("GET on a new connection through the 150 ms proxy took %v, want two round trips", d)
	}
	d, err = timedGet(hc, url)
	if err != nil {
		t.Fatal(err)
	}
	if d < 145*time.Millisecond || d > time.Second {
		t.Errorf("GET through the 150 ms proxy took %v", d)
	}

	if err := tp.setEnabled(ctx, name, false); err != nil {
		t.Fatal(err)
	}
	hc.CloseIdleConnections()
	if _, err := timedGet(hc, url); err == nil {
		t.Error("GET through a disabled proxy succeeded")
	}
	if err := tp.setEnabled(ctx, name, true); err != nil {
		t.Fatal(err)
	}

	p.RTT[PairKey(US, AP)] = 20 * time.Millisecond
	p.Jitter = 0.5
	for _, tc := range linkToxics(p, US, AP) {
		if err := tp.updateToxic(ctx, name, tc); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := timedGet(hc, url); err != nil { // a new connection after the cut
		t.Fatal(err)
	}
	d, err = timedGet(hc, url)
	if err != nil {
		t.Fatalf("GET after enabling the proxy again: %v", err)
	}
	if d < 8*time.Millisecond || d > 100*time.Millisecond {
		t.Errorf("GET through the proxy updated to 20 ms ±50%% took %v", d)
	}
}
