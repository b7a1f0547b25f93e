package httpapi_test

import (
	"bytes"
	"io"
	"io/fs"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgebase/edgebase/console"
)

// consoleFile is an embedded console file by its name under static/.
func consoleFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := fs.ReadFile(console.Static, "static/"+name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// consoleNames lists the embedded console files (names under static/).
func consoleNames(t *testing.T) []string {
	t.Helper()
	var names []string
	err := fs.WalkDir(console.Static, "static", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, strings.TrimPrefix(p, "static/"))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 5 {
		t.Fatalf("only %d console files embedded: %v", len(names), names)
	}
	return names
}

// checkConsoleHeaders fails unless r carries the console's security headers.
func checkConsoleHeaders(t *testing.T, what string, r reply) {
	t.Helper()
	csp := r.Header.Get("Content-Security-Policy")
	directives := map[string][]string{}
	for _, d := range strings.Split(csp, ";") {
		f := strings.Fields(d)
		if len(f) > 0 {
			directives[f[0]] = f[1:]
		}
	}
	for name, want := range map[string][]string{
		"default-src":     {"'none'"},
		"script-src":      {"'self'"},
		"style-src":       {"'self'"},
		"connect-src":     {"'self'"},
		"base-uri":        {"'none'"},
		"form-action":     {"'none'"},
		"frame-ancestors": {"'none'"},
	} {
		if !slices.Equal(directives[name], want) {
			t.Errorf("%s: CSP %s is %v, want %v (the policy: %q)", what, name, directives[name], want, csp)
		}
	}
	if strings.Contains(csp, "unsafe-") {
		t.Errorf("%s: the CSP allows something unsafe: %q", what, csp)
	}
	for k, want := range map[string]string{
		"X-Content-Type-Options": "nosniff",
		"X-Frame-Options":        "DENY",
		"Referrer-Policy":        "no-referrer",
	} {
		if got := r.Header.Get(k); got != want {
			t.Errorf("%s: %s %q, want %q", what, k, got, want)
		}
	}
}

func TestConsoleFiles(t *testing.T) {
	e := newEnv(t)
	for _, name := range consoleNames(t) {
		target := "/_/console/" + name
		if name == "index.html" {
			target = "/_/"
		}
		t.Run(name, func(t *testing.T) {
			body := consoleFile(t, name)
			r := e.mustSend(t, http.MethodGet, target, nil, "")
			if r.Status != http.StatusOK || !bytes.Equal(r.Body, body) {
				t.Fatalf("GET %s: status %d, %d bytes (want the %d embedded)", target, r.Status, len(r.Body), len(body))
			}
			checkConsoleHeaders(t, "GET "+target, r)
			want := map[string]string{
				".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".html": "text/html; charset=utf-8",
			}[path.Ext(name)]
			if got := r.Header.Get("Content-Type"); got != want {
				t.Errorf("Content-Type %q, want %q", got, want)
			}
			if got := r.Header.Get("Cache-Control"); got != "no-cache" {
				t.Errorf("Cache-Control %q, want no-cache (revalidate: the files change with the binary)", got)
			}
			etag := r.Header.Get("ETag")
			if len(etag) < 10 || etag[0] != '"' {
				t.Fatalf("ETag %q", etag)
			}
			h := e.mustSend(t, http.MethodHead, target, nil, "")
			if h.Status != http.StatusOK || len(h.Body) != 0 || h.Header.Get("ETag") != etag || h.Header.Get("Content-Type") != want {
				t.Errorf("HEAD: status %d, %d bytes, ETag %q, Content-Type %q", h.Status, len(h.Body), h.Header.Get("ETag"), h.Header.Get("Content-Type"))
			}
			checkConsoleHeaders(t, "HEAD "+target, h)
			for _, inm := range []string{etag, `"x", ` + etag, "W/" + etag, "*"} {
				nm := e.mustSend(t, http.MethodGet, target, map[string]string{"If-None-Match": inm}, "")
				if nm.Status != http.StatusNotModified || len(nm.Body) != 0 || nm.Header.Get("ETag") != etag {
					t.Errorf("If-None-Match %s: status %d, %d bytes, ETag %q", inm, nm.Status, len(nm.Body), nm.Header.Get("ETag"))
				}
			}
			if other := e.mustSend(t, http.MethodGet, target, map[string]string{"If-None-Match": `"other"`}, ""); other.Status != http.StatusOK {
				t.Errorf("If-None-Match of another version: status %d", other.Status)
			}
			for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
				r := e.mustSend(t, m, target, nil, "")
				checkError(t, r, http.StatusMethodNotAllowed, "method_not_allowed", "")
				checkConsoleHeaders(t, m+" "+target, r)
				if got := r.Header.Get("Allow"); got != "GET, HEAD" {
					t.Errorf("%s %s: Allow %q", m, target, got)
				}
			}
		})
	}
}

func TestConsoleNotFound(t *testing.T) {
	e := newEnv(t)
	// Names that are no console file, directories, the page under another
	// name, and names with an encoded separator: 404 in the error shape,
	// with the console's headers.
	for _, target := range []string{
		"/_/nope", "/_/console.js", "/_/app.js", "/_/console/nope.js", "/_/console/index.html",
		"/_/console/pages/nope.js", "/_/console/pages/index.html",
		"/_/console/pages%2Fsignin.js", "/_/console/pages%5Csignin.js", "/_/console/..%2Fgo.mod", "/_/console/pages/..%2Fapp.js",
		"/_/console/static/app.js", "/_/console/embed.go",
	} {
		r := e.mustSend(t, http.MethodGet, target, nil, "")
		checkError(t, r, http.StatusNotFound, "not_found", "")
		checkConsoleHeaders(t, target, r)
	}

	// A directory (a path ending in a slash) or a path with dot segments is
	// refused before routing (edges.go: not in canonical form), never
	// listed, redirected or resolved against a directory. Sent as written,
	// outside the document's checker (which would clean it).
	raw := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, target := range []string{"/_/console/", "/_/console/pages/", "/_/console/../../go.mod", "/_/console/pages/../../console/embed.go", "/_/console/./app.js", "/_/console//app.js"} {
		req, err := http.NewRequest(http.MethodGet, e.base+target, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.URL.Opaque = target // sent as written, dot segments included
		resp, err := raw.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !bytes.Contains(body, []byte(`"not_found"`)) {
			t.Errorf("GET %s: status %d, want 404 not_found\n%s", target, resp.StatusCode, body)
		}
	}
}

// TestConsoleCORS: the console's files are public assets (no credentials);
// a foreign origin learns nothing more than without CORS, and the page
// itself needs none (it calls its own origin).
func TestConsoleCORS(t *testing.T) {
	e := newEnv(t)
	r := e.mustSend(t, http.MethodGet, "/_/", map[string]string{"Origin": "https://elsewhere.example"}, "")
	if r.Status != http.StatusOK {
		t.Fatalf("GET /_/ with a foreign Origin: status %d", r.Status)
	}
	if got := r.Header.Get("Access-Control-Allow-Origin"); got != "" {
		t.Errorf("a foreign origin not listed anywhere got Access-Control-Allow-Origin %q for the console", got)
	}
	checkConsoleHeaders(t, "GET /_/ with a foreign Origin", r)
}

// unsafeDOM are the ways to turn data into markup or code, which the console
// never uses (dom.js's h() builds every node, text as text nodes), and the
// inline scripts and styles its CSP forbids anyway.
var unsafeDOM = []struct {
	re   *regexp.Regexp
	what string
}{
	{regexp.MustCompile(`\binnerHTML\b`), "innerHTML"},
	{regexp.MustCompile(`\bouterHTML\b`), "outerHTML"},
	{regexp.MustCompile(`\binsertAdjacentHTML\b`), "insertAdjacentHTML"},
	{regexp.MustCompile(`\bdocument\s*\.\s*write(ln)?\b`), "document.write"},
	{regexp.MustCompile(`\beval\s*\(`), "eval"},
	{regexp.MustCompile(`\bnew\s+Function\b`), "new Function"},
	{regexp.MustCompile(`\bcreateContextualFragment\b`), "createContextualFragment"},
	{regexp.MustCompile(`\bDOMParser\b`), "DOMParser"},
	{regexp.MustCompile(`\bsrcdoc\b`), "srcdoc"},
	{regexp.MustCompile(`(?i)\bstyle\s*=\s*["']`), `an inline style="..." attribute`},
	{regexp.MustCompile(`setAttribute\(\s*['"](style|on[a-z]+)['"]`), "setAttribute of style or an event handler"},
	{regexp.MustCompile(`(?i)javascript:`), "a javascript: URL"},
	{regexp.MustCompile(`\bset(Timeout|Interval)\(\s*['"` + "`" + `]`), "a timer with code as a string"},
}

// inlineScript matches a <script> tag without src and an onxxx= attribute.
var (
	scriptTag   = regexp.MustCompile(`(?i)<script\b[^>]*>`)
	handlerAttr = regexp.MustCompile(`(?i)<[a-z][^>]*\son[a-z]+\s*=`)
	styleTag    = regexp.MustCompile(`(?i)<style\b`)
)

// TestConsoleNoUnsafeDOM is a static check of the embedded files: no file
// builds markup from strings, evaluates code, or carries an inline script,
// handler or style. Comment lines may name these (to say they are not used).
func TestConsoleNoUnsafeDOM(t *testing.T) {
	for _, name := range consoleNames(t) {
		src := string(consoleFile(t, name))
		for i, line := range strings.Split(src, "\n") {
			trim := strings.TrimSpace(line)
			if strings.HasPrefix(trim, "//") || strings.HasPrefix(trim, "*") || strings.HasPrefix(trim, "/*") {
				continue
			}
			for _, u := range unsafeDOM {
				if u.re.MatchString(line) {
					t.Errorf("%s:%d uses %s: %s", name, i+1, u.what, trim)
				}
			}
		}
		if path.Ext(name) != ".html" {
			continue
		}
		for _, tag := range scriptTag.FindAllString(src, -1) {
			if !strings.Contains(tag, " src=") || !strings.Contains(tag, `type="module"`) {
				t.Errorf("%s: %s: every script is a module loaded from the node (src=, type=module)", name, tag)
			}
		}
		if m := handlerAttr.FindString(src); m != "" {
			t.Errorf("%s: an inline event handler: %s", name, m)
		}
		if styleTag.MatchString(src) {
			t.Errorf("%s: an inline <style> element", name)
		}
	}
}

// TestConsoleReferences: every module the console imports and every
// stylesheet or script index.html names is an embedded file, and every page
// module has its stylesheet linked.
func TestConsoleReferences(t *testing.T) {
	names := consoleNames(t)
	has := func(n string) bool { return slices.Contains(names, n) }
	importRe := regexp.MustCompile(`(?m)^\s*(?:import|export)\b[^'"]*?from\s+['"]([^'"]+)['"]|^\s*import\s+['"]([^'"]+)['"]`)
	for _, name := range names {
		if path.Ext(name) != ".js" {
			continue
		}
		for _, m := range importRe.FindAllStringSubmatch(string(consoleFile(t, name)), -1) {
			spec := m[1] + m[2]
			switch {
			case spec == "/_/sdk/edgebase.js":
			case strings.HasPrefix(spec, "./") || strings.HasPrefix(spec, "../"):
				if target := path.Join(path.Dir(name), spec); !has(target) {
					t.Errorf("%s imports %s: no embedded %s", name, spec, target)
				}
			default:
				t.Errorf("%s imports %s: the console imports only its own files and /_/sdk/edgebase.js", name, spec)
			}
		}
	}
	index := string(consoleFile(t, "index.html"))
	refRe := regexp.MustCompile(`(?:href|src)="(/_/console/[^"]+)"`)
	linked := map[string]bool{}
	for _, m := range refRe.FindAllStringSubmatch(index, -1) {
		n := strings.TrimPrefix(m[1], "/_/console/")
		linked[n] = true
		if !has(n) {
			t.Errorf("index.html names %s: no embedded %s", m[1], n)
		}
	}
	for _, name := range names {
		if strings.HasPrefix(name, "pages/") && path.Ext(name) == ".js" {
			if css := strings.TrimSuffix(name, ".js") + ".css"; !linked[css] {
				t.Errorf("index.html does not link %s (the stylesheet of %s)", css, name)
			}
		}
	}
}
