package deploy_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

const nomadJob = "deploy/nomad/edgebase.nomad.hcl"

// TestNomadJob parses the Nomad job with hashicorp/hcl and checks what an
// operator relies on: one service job, three voters and one edge node on the
// docker driver, the environment the binary actually reads (names checked
// against the flags declared in cmd/edgebase), secrets from Nomad variables
// only, a /readyz check on every service and a one-at-a-time rolling update.
func TestNomadJob(t *testing.T) {
	src := mustRead(t, nomadJob)
	flags := binaryFlags(t)
	for _, p := range jobProblems(src, nomadJob, flags, devSecrets(t)) {
		t.Error(p)
	}
}

// TestNomadJobChecksCanFail feeds broken copies of the job to the same
// checks: a syntax error must come back as HCL diagnostics, and each
// deliberate mistake as the problem that names it.
func TestNomadJobChecksCanFail(t *testing.T) {
	src := string(mustRead(t, nomadJob))
	flags := binaryFlags(t)
	secrets := devSecrets(t)

	t.Run("syntax error", func(t *testing.T) {
		broken := strings.Replace(src, `group "edge" {`, `group "edge" {{`, 1)
		if broken == src {
			t.Fatal(`the job has no group "edge" to break`)
		}
		_, diags := hclparse.NewParser().ParseHCL([]byte(broken), "broken.nomad.hcl")
		if !diags.HasErrors() {
			t.Fatal("a broken copy of the job parsed without error diagnostics")
		}
		t.Logf("diagnostics, as expected: %s", diags.Error())
		probs := jobProblems([]byte(broken), "broken.nomad.hcl", flags, secrets)
		if len(probs) == 0 || !strings.Contains(probs[0], "broken.nomad.hcl") {
			t.Fatalf("jobProblems on the broken copy: %q, want the parse error first", probs)
		}
	})

	mutations := []struct {
		name, old, new, want string
	}{
		{"parallel update", "max_parallel      = 1", "max_parallel      = 2", "max_parallel"},
		{"two voters", "count = 3", "count = 2", `group "voter": count`},
		{"health path", `path     = "/readyz"`, `path     = "/healthz"`, "/readyz"},
		{"exec driver", `driver = "docker"`, `driver = "exec"`, "docker"},
		{"misspelt variable", "EDGEBASE_NODE_ID        =", "EDGEBASE_NODEID         =", "EDGEBASE_NODEID"},
		{"literal secret", "EDGEBASE_HTTP_ADDR      = \":8080\"\n",
			"EDGEBASE_HTTP_ADDR      = \":8080\"\n        EDGEBASE_ADMIN_TOKEN    = \"hunter2-hunter2\"\n", "EDGEBASE_ADMIN_TOKEN"},
		{"dev secret", `{{ .cluster_secret | toJSON }}`, secrets[1], "development secret"},
		{"no join list", "EDGEBASE_JOIN={{ $urls }}", "EDGEBASE_JOINS={{ $urls }}", "EDGEBASE_JOIN"},
		{"fixed node id", `"${NOMAD_GROUP_NAME}-${NOMAD_ALLOC_INDEX}"`, `"voter"`, "EDGEBASE_NODE_ID"},
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			if !strings.Contains(src, m.old) {
				t.Fatalf("the job no longer contains %q: update this mutation", m.old)
			}
			probs := jobProblems([]byte(strings.Replace(src, m.old, m.new, 1)), "mutated.nomad.hcl", flags, secrets)
			if !slices.ContainsFunc(probs, func(p string) bool { return strings.Contains(p, m.want) }) {
				t.Fatalf("replacing %q with %q: problems %q, want one mentioning %q", m.old, m.new, probs, m.want)
			}
		})
	}
}

// jobProblems parses a Nomad job and lists every way it falls short.
func jobProblems(src []byte, filename string, flags map[string]bool, devSecrets []string) []string {
	f, diags := hclparse.NewParser().ParseHCL(src, filename)
	if diags.HasErrors() {
		return []string{diags.Error()}
	}
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }

	root := f.Body.(*hclsyntax.Body)
	ctx := evalContext(root)
	jobs := blocks(root, "job")
	if len(jobs) != 1 {
		bad("want exactly one job block, got %d", len(jobs))
		return probs
	}
	job := jobs[0].Body
	if v := str(job, "type", ctx); v != "service" {
		bad("job type %q, want service", v)
	}

	updates := blocks(job, "update")
	if len(updates) != 1 {
		bad("want one update block in the job, got %d", len(updates))
	}
	for _, g := range blocks(job, "group") {
		updates = append(updates, blocks(g.Body, "update")...)
	}
	for _, u := range updates {
		if n, ok := num(u.Body, "max_parallel", ctx); !ok || n != 1 {
			bad("update: max_parallel must be 1 (one node at a time), got %s", src0(src, u.Body, "max_parallel"))
		}
		if v := str(u.Body, "health_check", ctx); v != "checks" {
			bad("update: health_check %q, want checks (wait for /readyz)", v)
		}
		if _, ok := u.Body.Attributes["min_healthy_time"]; !ok {
			bad("update: no min_healthy_time")
		}
	}

	groups := map[string]*hclsyntax.Block{}
	for _, g := range blocks(job, "group") {
		groups[g.Labels[0]] = g
	}
	if names := slices.Sorted(maps.Keys(groups)); !slices.Equal(names, []string{"edge", "voter"}) {
		bad("groups %v, want edge and voter", names)
	}
	for name, want := range map[string]int{"voter": 3, "edge": 1} {
		g := groups[name]
		if g == nil {
			continue
		}
		if n, ok := num(g.Body, "count", ctx); !ok || n != want {
			bad("group %q: count %s, want %d", name, src0(src, g.Body, "count"), want)
		}
		probs = append(probs, groupProblems(src, name, g.Body, ctx, flags)...)
	}

	for _, s := range devSecrets {
		if strings.Contains(string(src), s) {
			bad("the job contains a development secret of deploy/compose.env (%.6s...)", s)
		}
	}
	return probs
}

// groupProblems checks one task group.
func groupProblems(src []byte, name string, g *hclsyntax.Body, ctx *hcl.EvalContext, flags map[string]bool) []string {
	var probs []string
	bad := func(format string, args ...any) {
		probs = append(probs, fmt.Sprintf("group %q: ", name)+fmt.Sprintf(format, args...))
	}

	for _, b := range []string{"network", "volume", "restart", "reschedule"} {
		if len(blocks(g, b)) == 0 {
			bad("no %s block", b)
		}
	}
	ports := map[string]bool{}
	for _, n := range blocks(g, "network") {
		for _, p := range blocks(n.Body, "port") {
			ports[p.Labels[0]] = true
		}
	}
	if !ports["http"] || !ports["raft"] {
		bad("network ports %v, want http and raft", slices.Sorted(maps.Keys(ports)))
	}

	services := blocks(g, "service")
	if len(services) == 0 {
		bad("no service block")
	}
	for _, s := range services {
		if v := str(s.Body, "port", ctx); v != "http" {
			bad("service on port %q, want http", v)
		}
		if !slices.Contains(strList(s.Body, "tags", ctx), "metrics") {
			bad("service tags %v lack \"metrics\" (what the Prometheus scrape job keeps)", strList(s.Body, "tags", ctx))
		}
		checks := blocks(s.Body, "check")
		readyz := slices.ContainsFunc(checks, func(c *hclsyntax.Block) bool {
			return str(c.Body, "type", ctx) == "http" && str(c.Body, "path", ctx) == "/readyz"
		})
		if !readyz {
			bad("service has no http check on /readyz")
		}
	}

	mounts := map[string]string{} // volume name → destination, from the server task
	var server *hclsyntax.Block
	for _, task := range blocks(g, "task") {
		tn := task.Labels[0]
		if d := str(task.Body, "driver", ctx); d != "docker" {
			bad("task %q: driver %q, want docker", tn, d)
		}
		cfgs := blocks(task.Body, "config")
		if len(cfgs) != 1 {
			bad("task %q: want one config block", tn)
			continue
		}
		if img := str(cfgs[0].Body, "image", ctx); img != "edgebase:dev" {
			bad("task %q: image %q, want var.image (default edgebase:dev)", tn, img)
		}
		env, _ := taskEnv(src, task.Body)
		for k := range env {
			if strings.HasPrefix(k, "EDGEBASE_") && !flags[k] {
				bad("task %q sets %s, which is not a flag of the edgebase binary", tn, k)
			}
		}
		if len(blocks(task.Body, "lifecycle")) > 0 {
			continue // a prestart helper
		}
		if !slices.Contains(strList(cfgs[0].Body, "args", ctx), "serve") {
			bad("task %q: not a lifecycle task and not `edgebase serve`", tn)
			continue
		}
		server = task
		for _, vm := range blocks(task.Body, "volume_mount") {
			mounts[str(vm.Body, "volume", ctx)] = str(vm.Body, "destination", ctx)
		}
	}
	if server == nil {
		bad("no task runs `edgebase serve`")
		return probs
	}
	probs = append(probs, serverProblems(src, name, server, mounts, ctx)...)
	return probs
}

// serverProblems checks the environment of the task that runs the server.
func serverProblems(src []byte, group string, task *hclsyntax.Block, mounts map[string]string, ctx *hcl.EvalContext) []string {
	var probs []string
	bad := func(format string, args ...any) {
		probs = append(probs, fmt.Sprintf("group %q, task %q: ", group, task.Labels[0])+fmt.Sprintf(format, args...))
	}
	env, fromTemplate := taskEnv(src, task.Body)

	for _, k := range []string{"EDGEBASE_NODE_ID", "EDGEBASE_DATA_DIR", "EDGEBASE_ADVERTISE_HTTP", "EDGEBASE_ADVERTISE_RAFT",
		"EDGEBASE_JOIN", "EDGEBASE_ADMIN_TOKEN", "EDGEBASE_CLUSTER_SECRET"} {
		if _, ok := env[k]; !ok {
			bad("does not set %s", k)
		}
	}
	_, key := env["EDGEBASE_SECRET_KEY"]
	_, keyFile := env["EDGEBASE_SECRET_KEY_FILE"]
	if !key && !keyFile {
		bad("sets neither EDGEBASE_SECRET_KEY nor EDGEBASE_SECRET_KEY_FILE (TOTP needs the same key on every node)")
	}
	// Per-allocation values come from Nomad's runtime variables.
	for _, k := range []string{"EDGEBASE_NODE_ID", "EDGEBASE_ADVERTISE_HTTP", "EDGEBASE_ADVERTISE_RAFT"} {
		if v, ok := env[k]; ok && !strings.Contains(v, "${NOMAD_") {
			bad("%s = %s: want a ${NOMAD_*} interpolation (each allocation its own)", k, v)
		}
	}
	if v, ok := env["EDGEBASE_DATA_DIR"]; ok {
		dir := strings.Trim(v, `"`)
		if !slices.ContainsFunc(slices.Collect(maps.Values(mounts)), func(m string) bool { return m != "" && strings.HasPrefix(dir, m) }) {
			bad("EDGEBASE_DATA_DIR %s is not on a mounted volume (%v)", v, mounts)
		}
	}
	if tpl, ok := fromTemplate["EDGEBASE_JOIN"]; !ok || !strings.Contains(tpl, "nomadService") {
		bad("EDGEBASE_JOIN must come from a template reading Nomad's service catalog (nomadService)")
	}
	edge := strings.Trim(env["EDGEBASE_EDGE"], `"`)
	if group == "edge" && edge != "true" {
		bad("EDGEBASE_EDGE = %q, want \"true\"", edge)
	}
	if group != "edge" && edge == "true" {
		bad("a voter sets EDGEBASE_EDGE")
	}
	// Secrets: rendered from Nomad variables, never written in the job.
	secrets := []string{"EDGEBASE_ADMIN_TOKEN", "EDGEBASE_CLUSTER_SECRET", "EDGEBASE_SECRET_KEY"}
	for _, e := range blocks(task.Body, "env") {
		for k, a := range e.Body.Attributes {
			if slices.Contains(secrets, k) {
				bad("%s is set in the env block (%.12s...): secrets must come from a Nomad variable (nomadVar) in a template", k, exprSource(src, a))
			}
		}
	}
	for _, k := range secrets {
		v, ok := env[k]
		if !ok {
			continue
		}
		tpl, templated := fromTemplate[k]
		if !templated || !strings.Contains(tpl, "nomadVar") || !strings.Contains(v, "{{") {
			bad("%s is set to a literal value (%.12s...): secrets must come from a Nomad variable (nomadVar) in a template", k, v)
		}
	}
	if keyFile {
		path := strings.Trim(env["EDGEBASE_SECRET_KEY_FILE"], `"`)
		found := false
		for _, tb := range blocks(task.Body, "template") {
			dest := strings.TrimPrefix(str(tb.Body, "destination", ctx), "${NOMAD_SECRETS_DIR}/")
			if "/"+dest == path && strings.Contains(exprSource(src, tb.Body.Attributes["data"]), "nomadVar") {
				found = true
			}
		}
		if !found {
			bad("EDGEBASE_SECRET_KEY_FILE %s is not rendered from a Nomad variable by a template of the task", path)
		}
	}
	if _, ok := task.Body.Attributes["kill_timeout"]; !ok {
		bad("no kill_timeout: the default 5s cuts the leadership hand-over on SIGTERM short")
	}
	return probs
}

// envLine is KEY=value in an env template.
var envLine = regexp.MustCompile(`(?m)^\s*([A-Z][A-Z0-9_]*)=(.*)$`)

// taskEnv is the environment a task sets: its env block (values as written)
// and its env = true templates (values as templated). fromTemplate maps the
// names that templates set to the whole template text.
func taskEnv(src []byte, task *hclsyntax.Body) (env, fromTemplate map[string]string) {
	env, fromTemplate = map[string]string{}, map[string]string{}
	for _, e := range blocks(task, "env") {
		for k, a := range e.Body.Attributes {
			env[k] = exprSource(src, a)
		}
	}
	for _, tb := range blocks(task, "template") {
		a := tb.Body.Attributes["env"]
		if a == nil {
			continue
		}
		if v, d := a.Expr.Value(nil); d.HasErrors() || v.Type() != cty.Bool || !v.True() {
			continue
		}
		data := exprSource(src, tb.Body.Attributes["data"])
		for _, m := range envLine.FindAllStringSubmatch(data, -1) {
			env[m[1]] = m[2]
			fromTemplate[m[1]] = data
		}
	}
	return env, fromTemplate
}

// evalContext evaluates var.* from the variable blocks' defaults.
func evalContext(root *hclsyntax.Body) *hcl.EvalContext {
	vars := map[string]cty.Value{}
	for _, v := range blocks(root, "variable") {
		if d := v.Body.Attributes["default"]; d != nil {
			if val, diags := d.Expr.Value(nil); !diags.HasErrors() {
				vars[v.Labels[0]] = val
			}
		}
	}
	return &hcl.EvalContext{Variables: map[string]cty.Value{"var": cty.ObjectVal(vars)}}
}

func blocks(b *hclsyntax.Body, typ string) []*hclsyntax.Block {
	var out []*hclsyntax.Block
	for _, blk := range b.Blocks {
		if blk.Type == typ {
			out = append(out, blk)
		}
	}
	return out
}

// str is a string attribute's value ("" when absent or not a known string).
func str(b *hclsyntax.Body, name string, ctx *hcl.EvalContext) string {
	a := b.Attributes[name]
	if a == nil {
		return ""
	}
	v, diags := a.Expr.Value(ctx)
	if diags.HasErrors() || !v.IsKnown() || v.IsNull() || v.Type() != cty.String {
		return ""
	}
	return v.AsString()
}

func num(b *hclsyntax.Body, name string, ctx *hcl.EvalContext) (int, bool) {
	a := b.Attributes[name]
	if a == nil {
		return 0, false
	}
	v, diags := a.Expr.Value(ctx)
	if diags.HasErrors() || !v.IsKnown() || v.IsNull() || v.Type() != cty.Number {
		return 0, false
	}
	i, acc := v.AsBigFloat().Int64()
	return int(i), acc == 0
}

func strList(b *hclsyntax.Body, name string, ctx *hcl.EvalContext) []string {
	a := b.Attributes[name]
	if a == nil {
		return nil
	}
	v, diags := a.Expr.Value(ctx)
	if diags.HasErrors() || !v.IsKnown() || v.IsNull() || !v.CanIterateElements() {
		return nil
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.Type() == cty.String && e.IsKnown() {
			out = append(out, e.AsString())
		}
	}
	return out
}

// exprSource is an attribute's expression as written in the file.
func exprSource(src []byte, a *hclsyntax.Attribute) string {
	if a == nil {
		return ""
	}
	r := a.Expr.Range()
	return string(r.SliceBytes(src))
}

// src0 is an attribute's source for messages ("absent" when missing).
func src0(src []byte, b *hclsyntax.Body, name string) string {
	if a := b.Attributes[name]; a != nil {
		return exprSource(src, a)
	}
	return "absent"
}

// binaryFlags is the set of EDGEBASE_<FLAG> variables the binary reads: every
// flag any command of cmd/edgebase declares (fs.StringVar(&x, "node-id", ...),
// fs.String("url", ...), ...), read from its source with go/parser.
func binaryFlags(t *testing.T) map[string]bool {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "cmd", "edgebase")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	flags := map[string]bool{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			idx := -1
			switch sel.Sel.Name {
			case "String", "Bool", "Int", "Int64", "Uint", "Uint64", "Float64", "Duration", "Func", "BoolFunc":
				idx = 0
			case "StringVar", "BoolVar", "IntVar", "Int64Var", "UintVar", "Uint64Var", "Float64Var", "DurationVar", "Var", "TextVar":
				idx = 1
			}
			if idx < 0 || len(call.Args) <= idx {
				return true
			}
			lit, ok := call.Args[idx].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			name, err := strconv.Unquote(lit.Value)
			if err != nil || !regexp.MustCompile(`^[a-z][a-z0-9-]*$`).MatchString(name) {
				return true
			}
			flags["EDGEBASE_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))] = true
			return true
		})
	}
	// The flags the deployment files rely on must be among them: if this
	// fails, the parser above has lost track of how cmd/edgebase declares
	// flags, not the job.
	for _, k := range []string{"EDGEBASE_NODE_ID", "EDGEBASE_DATA_DIR", "EDGEBASE_JOIN", "EDGEBASE_EDGE", "EDGEBASE_URL"} {
		if !flags[k] {
			t.Fatalf("found no flag for %s in cmd/edgebase (found %v)", k, slices.Sorted(maps.Keys(flags)))
		}
	}
	return flags
}

// devSecrets are the values of deploy/compose.env: public development
// defaults that no other deployment file may carry.
func devSecrets(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(string(mustRead(t, "deploy/compose.env")), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if _, v, ok := strings.Cut(line, "="); ok && len(v) >= 8 {
			out = append(out, v)
		}
	}
	if len(out) < 2 {
		t.Fatalf("deploy/compose.env: want its secrets, found %d values", len(out))
	}
	return out
}
