package browser

import (
	"context"
	"testing"

	"github.com/edgebase/edgebase/internal/fcmfake"
	"github.com/edgebase/edgebase/internal/proctest"
)

// The console test: real Chromium against a real process cluster (three
// voters and an edge node), walking every page of the console at /_/.
//
// TODO(H-core): startConsoleEnv, the helpers below, TestConsole.

// consoleEnv is the cluster, the project and the browser that the console's
// subtests share. The subtests run in order (see TestConsole), each leaving
// the cluster as the next one expects.
type consoleEnv struct {
	ctx        context.Context
	voters     []*sdkNode // n1, n2, n3 (n1 bootstrapped)
	edge       *sdkNode   // e1, joined with --edge
	fcm        *fcmfake.Server
	proj       proctest.Project // created on n1; proj.Token is an owner session
	ownerEmail string
	ownerPass  string
	totpSecret string // the owner's authenticator secret (TOTP on)
	lastCode   string // the last TOTP code used (a code is taken once)
	adminToken string
	// tab is the browser tab signed in (as the owner of proj and as the
	// operator) on the console of consoleNode.
	tab         *page
	consoleNode *sdkNode
}

// open navigates p to route (e.g. "data?path=notes") of the console on
// e.consoleNode and waits until the page's heading (#h-<page id>) is shown.
func (e *consoleEnv) open(t *testing.T, p *page, route string) {
	t.Helper()
	t.Fatal("TODO(H-core): open")
}

// shoot saves a screenshot of p's current page at 1280×800 and at 390×844
// as docs/console/<name>-desktop.png and docs/console/<name>-phone.png.
func (e *consoleEnv) shoot(t *testing.T, p *page, name string) {
	t.Helper()
	t.Fatal("TODO(H-core): shoot")
}

// checkA11y fails unless every input, select and textarea of p's current
// page has a label, and every control can be reached with Tab alone and
// shows a visible focus.
func (e *consoleEnv) checkA11y(t *testing.T, p *page) {
	t.Helper()
	t.Fatal("TODO(H-core): checkA11y")
}

// newTab opens a second tab in p's browser (it shares localStorage, so it is
// signed in as p is).
func (e *consoleEnv) newTab(t *testing.T, p *page) *page {
	t.Helper()
	t.Fatal("TODO(H-core): newTab")
	return nil
}

// tabTo presses Tab in p until the element matching selector has focus,
// failing when it is never reached (every control must be reachable with
// the keyboard alone).
func (e *consoleEnv) tabTo(t *testing.T, p *page, selector string) {
	t.Helper()
	t.Fatal("TODO(H-core): tabTo")
}

// key sends one key (e.g. "Enter", " ", "Escape") to the focused element of p.
func (e *consoleEnv) key(t *testing.T, p *page, key string) {
	t.Helper()
	t.Fatal("TODO(H-core): key")
}

// typeInto focuses the element matching selector and types text with real
// key events (replacing what it held).
func (e *consoleEnv) typeInto(t *testing.T, p *page, selector, text string) {
	t.Helper()
	t.Fatal("TODO(H-core): typeInto")
}
