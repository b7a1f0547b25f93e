package deploy_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
	"go.yaml.in/yaml/v3"
)

const (
	regionsJob     = "deploy/nomad/edgebase-regions.nomad.hcl"
	regionsCompose = "deploy/compose-regions.yml"
)

// regionRTT is the round trip between two regions in milliseconds (the
// profile of issue 24): what "the nearest voter" means in a join list.
var regionRTT = map[[2]string]int{
	{"us", "us"}: 1, {"eu", "eu"}: 1, {"ap", "ap"}: 1,
	{"eu", "us"}: 80, {"ap", "us"}: 150, {"ap", "eu"}: 220,
}

func rtt(a, b string) int {
	if a > b {
		a, b = b, a
	}
	return regionRTT[[2]string{a, b}]
}

// flagVar is the EDGEBASE_<FLAG> name of a command-line argument
// ("--raft-commit-timeout=5ms" → EDGEBASE_RAFT_COMMIT_TIMEOUT), "" when the
// argument is not a flag.
func flagVar(arg string) string {
	if !strings.HasPrefix(arg, "--") {
		return ""
	}
	name, _, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
	return "EDGEBASE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// TestRegionsNomadJob parses the region-aware Nomad job and checks, besides
// what TestNomadJob checks of every group (the binary's flags, secrets from
// Nomad variables, /readyz, kill_timeout), the placement: voters in us and eu
// only, two plus one, one per client; exactly one edge node per datacenter of
// us, eu and ap; --wan on every node; static ports; join lists nearest first.
func TestRegionsNomadJob(t *testing.T) {
	src := mustRead(t, regionsJob)
	for _, p := range regionsJobProblems(src, regionsJob, binaryFlags(t), devSecrets(t)) {
		t.Error(p)
	}
}

// TestRegionsNomadJobChecksCanFail feeds broken copies of the job to the same
// checks: each deliberate mistake must come back as the problem naming it.
func TestRegionsNomadJobChecksCanFail(t *testing.T) {
	src := string(mustRead(t, regionsJob))
	flags := binaryFlags(t)
	secrets := devSecrets(t)

	t.Run("syntax error", func(t *testing.T) {
		broken := strings.Replace(src, `group "edge" {`, `group "edge" {{`, 1)
		if broken == src {
			t.Fatal(`the job has no group "edge" to break`)
		}
		probs := regionsJobProblems([]byte(broken), "broken.nomad.hcl", flags, secrets)
		if len(probs) == 0 || !strings.Contains(probs[0], "broken.nomad.hcl") {
			t.Fatalf("problems of the broken copy: %q, want the parse error first", probs)
		}
	})

	mutations := []struct {
		name, old, new, want string
	}{
		{"voter in ap", `value     = "us,eu"`, `value     = "us,eu,ap"`, `group "voter": allowed datacenters`},
		{"voters per region", `value     = "2"`, `value     = "3"`, `group "voter": distinct_property`},
		{"two edges per region", `value     = "1"`, `value     = "2"`, `group "edge": distinct_property`},
		{"voters on one client", "operator = \"distinct_hosts\"\n      value    = \"true\"", "operator = \"distinct_hosts\"\n      value    = \"false\"", "distinct_hosts"},
		{"spread favours eu", "percent = 67", "percent = 20", "spread"},
		{"one group per region", `group "voter" {`, `group "voter-us" {`, "groups"},
		{"edge count", "group \"edge\" {\n    count = 3", "group \"edge\" {\n    count = 1", `group "edge": count`},
		{"no wan preset", `default     = ["--wan"]`, `default     = []`, "--wan"},
		{"misspelt flag", `default     = ["--wan"]`, `default     = ["--wan", "--raft-heartbeat-timout=1s"]`, "EDGEBASE_RAFT_HEARTBEAT_TIMOUT"},
		{"description names a missing flag", "explicit --raft-heartbeat-timeout,", "explicit --raft-heartbeat-timeouts,", "--raft-heartbeat-timeouts"},
		{"parallel update", "max_parallel      = 1", "max_parallel      = 2", "max_parallel"},
		{"dynamic port", "static = 7001", "", `port "raft" has no static number`},
		{"edge ports clash", "static = 8081", "static = 8080", "are both 8080"},
		{"edge id by index", `EDGEBASE_NODE_ID        = "${NOMAD_GROUP_NAME}-${NOMAD_DC}"`, `EDGEBASE_NODE_ID        = "${NOMAD_GROUP_NAME}-${NOMAD_ALLOC_INDEX}"`, "NOMAD_DC"},
		{"join not nearest first", "{{- if eq .Datacenter $dc -}}", "{{- if false -}}", "own datacenter"},
		{"dev secret", `{{ .cluster_secret | toJSON }}`, secrets[1], "development secret"},
		{"health path", `path     = "/readyz"`, `path     = "/healthz"`, "/readyz"},
		{"edge flag on a voter", "EDGEBASE_HTTP_ADDR      = \":8080\"\n        EDGEBASE_RAFT_ADDR      = \":7000\"\n        EDGEBASE_ADVERTISE_HTTP = \"http://${NOMAD_ADDR_http}\"\n        EDGEBASE_ADVERTISE_RAFT = \"${NOMAD_ADDR_raft}\"\n        EDGEBASE_LOG_LEVEL      = var.log_level\n      }\n\n      # The join list: the registered",
			"EDGEBASE_EDGE           = \"true\"\n        EDGEBASE_HTTP_ADDR      = \":8080\"\n        EDGEBASE_RAFT_ADDR      = \":7000\"\n        EDGEBASE_ADVERTISE_HTTP = \"http://${NOMAD_ADDR_http}\"\n        EDGEBASE_ADVERTISE_RAFT = \"${NOMAD_ADDR_raft}\"\n        EDGEBASE_LOG_LEVEL      = var.log_level\n      }\n\n      # The join list: the registered",
			"a voter sets EDGEBASE_EDGE"},
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			if !strings.Contains(src, m.old) {
				t.Fatalf("the job no longer contains %q: update this mutation", m.old)
			}
			probs := regionsJobProblems([]byte(strings.Replace(src, m.old, m.new, 1)), "mutated.nomad.hcl", flags, secrets)
			if !slices.ContainsFunc(probs, func(p string) bool { return strings.Contains(p, m.want) }) {
				t.Fatalf("replacing %q with %q: problems %q, want one mentioning %q", m.old, m.new, probs, m.want)
			}
		})
	}
}

// regionsJobProblems parses the region-aware job and lists every way it
// falls short.
func regionsJobProblems(src []byte, filename string, flags map[string]bool, devSecrets []string) []string {
	f, diags := hclparse.NewParser().ParseHCL(src, filename)
	if diags.HasErrors() {
		return []string{diags.Error()}
	}
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }

	root := f.Body.(*hclsyntax.Body)
	ctx := evalContext(root)
	ctx.Functions = map[string]function.Function{"concat": stdlib.ConcatFunc}
	jobs := blocks(root, "job")
	if len(jobs) != 1 {
		bad("want exactly one job block, got %d", len(jobs))
		return probs
	}
	job := jobs[0].Body
	if v := str(job, "type", ctx); v != "service" {
		bad("job type %q, want service", v)
	}
	if dcs := strList(job, "datacenters", ctx); !slices.Equal(slices.Sorted(slices.Values(dcs)), []string{"ap", "eu", "us"}) {
		bad("job datacenters %v (default of var.datacenters), want us, eu and ap", dcs)
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
	}

	// The voters must be one group: Nomad updates groups in parallel, so
	// voters split over groups could restart two of three at once.
	groups := map[string]*hclsyntax.Block{}
	for _, g := range blocks(job, "group") {
		groups[g.Labels[0]] = g
	}
	if names := slices.Sorted(maps.Keys(groups)); !slices.Equal(names, []string{"edge", "voter"}) {
		bad("groups %v, want edge and voter (one voter group: Nomad updates groups in parallel)", names)
	}
	place := map[string]struct {
		count   int
		dcs     []string
		perDC   string
		clients bool // distinct_hosts
	}{
		"voter": {3, []string{"eu", "us"}, "2", true},
		"edge":  {3, []string{"ap", "eu", "us"}, "1", false},
	}
	ports := map[string]map[string]int{} // group → port label → static
	for name, want := range place {
		g := groups[name]
		if g == nil {
			continue
		}
		gbad := func(format string, args ...any) { bad("group %q: %s", name, fmt.Sprintf(format, args...)) }
		if n, ok := num(g.Body, "count", ctx); !ok || n != want.count {
			gbad("count %s, want %d", src0(src, g.Body, "count"), want.count)
		}
		probs = append(probs, groupProblems(src, name, g.Body, ctx, flags)...)

		var allowed []string
		perDC, hosts := "", false
		for _, c := range blocks(g.Body, "constraint") {
			attr := strings.Trim(exprSource(src, c.Body.Attributes["attribute"]), `"`)
			op := str(c.Body, "operator", ctx)
			switch {
			case op == "distinct_hosts":
				hosts = str(c.Body, "value", ctx) == "true"
			case attr == "${node.datacenter}" && op == "distinct_property":
				perDC = str(c.Body, "value", ctx)
			case attr == "${node.datacenter}" && (op == "set_contains_any" || op == "" || op == "=" || op == "=="):
				allowed = strings.Split(str(c.Body, "value", ctx), ",")
			}
		}
		if slices.Sort(allowed); !slices.Equal(allowed, want.dcs) {
			gbad("allowed datacenters %v (constraint on ${node.datacenter}), want %v", allowed, want.dcs)
		}
		if perDC != want.perDC {
			gbad("distinct_property on ${node.datacenter} is %q, want %q (at most that many per datacenter)", perDC, want.perDC)
		}
		if hosts != want.clients {
			gbad("distinct_hosts %v, want %v", hosts, want.clients)
		}

		ports[name] = map[string]int{}
		for _, n := range blocks(g.Body, "network") {
			for _, p := range blocks(n.Body, "port") {
				v, ok := num(p.Body, "static", ctx)
				if !ok {
					gbad("port %q has no static number (a node advertises its host port; it must not change)", p.Labels[0])
				}
				ports[name][p.Labels[0]] = v
			}
		}

		for _, task := range blocks(g.Body, "task") {
			if len(blocks(task.Body, "lifecycle")) > 0 {
				continue
			}
			probs = append(probs, regionsServerProblems(src, name, task, ctx, flags)...)
		}
	}
	for label, v := range ports["voter"] {
		if v != 0 && slices.Contains(slices.Collect(maps.Values(ports["edge"])), v) {
			bad("voter port %q and an edge port are both %d: an edge node may share a client with a voter", label, v)
		}
	}
	if g := groups["voter"]; g != nil {
		probs = append(probs, spreadProblems(g.Body, ctx)...)
	}

	for _, s := range devSecrets {
		if strings.Contains(string(src), s) {
			bad("the job contains a development secret of deploy/compose.env (%.6s...)", s)
		}
	}
	probs = append(probs, mentionedFlagProblems(string(src), flags)...)
	return probs
}

// tuningFlag is a Raft timing flag as the deployment files mention it in
// their comments and descriptions ("--raft-tls-*" is a family, not a flag).
var tuningFlag = regexp.MustCompile(`--(wan|raft-[a-z0-9-]*[a-z0-9])\b(-\*)?`)

// mentionedFlagProblems: every Raft timing flag a file tells the operator
// about, in comments included, is one the binary has.
func mentionedFlagProblems(src string, flags map[string]bool) []string {
	var probs []string
	seen := map[string]bool{}
	for _, m := range tuningFlag.FindAllStringSubmatch(src, -1) {
		if m[2] != "" || seen[m[1]] {
			continue
		}
		seen[m[1]] = true
		if v := flagVar("--" + m[1]); !flags[v] {
			probs = append(probs, fmt.Sprintf("the file mentions --%s (%s), which is not a flag of the edgebase binary", m[1], v))
		}
	}
	return probs
}

// spreadProblems checks that the voters prefer two in us and one in eu.
func spreadProblems(g *hclsyntax.Body, ctx *hcl.EvalContext) []string {
	pct := map[string]int{}
	for _, s := range blocks(g, "spread") {
		for _, tgt := range blocks(s.Body, "target") {
			n, _ := num(tgt.Body, "percent", ctx)
			pct[tgt.Labels[0]] = n
		}
	}
	if pct["us"] < 60 || pct["eu"] < 20 || pct["us"] <= pct["eu"] || len(pct) != 2 {
		return []string{fmt.Sprintf(`group "voter": spread targets %v, want about us 67 and eu 33 (two voters in us keep the quorum inside us)`, pct)}
	}
	return nil
}

// regionsServerProblems checks what the region-aware job adds to the server
// task: the --wan preset and known flags in its arguments, region-stable edge
// ids, and join lists that ask the own datacenter first.
func regionsServerProblems(src []byte, group string, task *hclsyntax.Block, ctx *hcl.EvalContext, flags map[string]bool) []string {
	var probs []string
	bad := func(format string, args ...any) {
		probs = append(probs, fmt.Sprintf("group %q, task %q: ", group, task.Labels[0])+fmt.Sprintf(format, args...))
	}
	cfgs := blocks(task.Body, "config")
	if len(cfgs) != 1 {
		return probs // groupProblems reports it
	}
	args := strList(cfgs[0].Body, "args", ctx)
	if !slices.Contains(args, "--wan") {
		bad("args %q lack --wan (the Raft timing preset for inter-region round trips)", args)
	}
	for _, a := range args {
		if v := flagVar(a); v != "" && !flags[v] {
			bad("argument %q (%s) is not a flag of the edgebase binary", a, v)
		}
	}
	env, fromTemplate := taskEnv(src, task.Body)
	if group == "edge" {
		// Alloc indexes do not follow datacenters: an edge's id and data
		// directory come from its datacenter, of which it is the only one.
		for _, k := range []string{"EDGEBASE_NODE_ID", "EDGEBASE_DATA_DIR"} {
			if !strings.Contains(env[k], "${NOMAD_DC}") {
				bad("%s = %s: want it named after the datacenter (${NOMAD_DC})", k, env[k])
			}
		}
	}
	if tpl := fromTemplate["EDGEBASE_JOIN"]; !strings.Contains(tpl, ".Datacenter") || !strings.Contains(tpl, `"NOMAD_DC"`) ||
		!regexp.MustCompile(`if eq \.Datacenter \$dc`).MatchString(tpl) {
		bad("EDGEBASE_JOIN does not list the nodes of its own datacenter first (compare .Datacenter with NOMAD_DC)")
	}
	return probs
}

// composeService is the part of a compose service the checks read.
type composeService struct {
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command"`
	EnvFile     any               `yaml:"env_file"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []any             `yaml:"volumes"`
	Ports       []any             `yaml:"ports"`
	Healthcheck struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	Deploy struct {
		Placement struct {
			Constraints []string `yaml:"constraints"`
		} `yaml:"placement"`
		RestartPolicy map[string]any `yaml:"restart_policy"`
	} `yaml:"deploy"`
}

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

// interpolate replaces ${VAR:-default} and ${VAR} with the default (or ""),
// as compose does with none of the variables set.
var interpolation = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}`)

func interpolate(src string) string {
	return interpolation.ReplaceAllString(src, "$2")
}

// TestRegionsCompose parses deploy/compose-regions.yml (YAML, anchors and
// merge keys, variables at their defaults) and checks it: six nodes placed
// by node.labels.region (two voters in us, one in eu, an edge in each of us,
// eu, ap), voters pinned to their host, --wan on every node, one node that
// bootstraps, join lists nearest voter first, the image of
// docker-compose.yml, and no secret in the file.
func TestRegionsCompose(t *testing.T) {
	src := mustRead(t, regionsCompose)
	for _, p := range composeProblems(t, src, true) {
		t.Error(p)
	}
}

// TestRegionsComposeChecksCanFail feeds broken copies to the same checks.
func TestRegionsComposeChecksCanFail(t *testing.T) {
	src := string(mustRead(t, regionsCompose))
	secrets := devSecrets(t)
	mutations := []struct {
		name, old, new, want string
	}{
		{"edge in the wrong region", "node.labels.region == ap", "node.labels.region == us", `"e-ap": placement`},
		{"voter not pinned", "          - node.labels.edgebase_voter == v-eu1\n", "", `"v-eu1": placement`},
		{"no wan preset", `command: ["serve", "--wan"]`, `command: ["serve"]`, "--wan"},
		{"misspelt flag", `command: ["serve", "--wan"]`, `command: ["serve", "--wan", "--raft-commit-timout=5ms"]`, "EDGEBASE_RAFT_COMMIT_TIMOUT"},
		{"edge votes", "      EDGEBASE_NODE_ID: e-eu\n      EDGEBASE_EDGE: \"true\"\n", "      EDGEBASE_NODE_ID: e-eu\n", `"e-eu": EDGEBASE_EDGE`},
		{"two bootstrappers", "      EDGEBASE_JOIN: http://v-us1:8080,http://v-eu1:8080\n", "", "bootstrap"},
		{"far voter first", "EDGEBASE_JOIN: http://v-eu1:8080,http://v-us1:8080,http://v-us2:8080", "EDGEBASE_JOIN: http://v-us1:8080,http://v-us2:8080,http://v-eu1:8080", `"e-eu": join`},
		{"join an edge", "EDGEBASE_JOIN: http://v-us1:8080,http://v-us2:8080\n", "EDGEBASE_JOIN: http://v-us1:8080,http://e-us:8080\n", `"v-eu1": join`},
		{"literal secret", "      EDGEBASE_NODE_ID: v-us1\n", "      EDGEBASE_NODE_ID: v-us1\n      EDGEBASE_CLUSTER_SECRET: " + secrets[1] + "\n", "sets the secret EDGEBASE_CLUSTER_SECRET"},
		{"shared volume", "      - v-us2-data:/data\n", "      - v-us1-data:/data\n", `volume "v-us1-data" at /data is also`},
		{"same port", "${EB_E_AP_PORT:-18186}", "${EB_E_AP_PORT:-18185}", "host port 18185 is also"},
		{"comment names a missing flag", "# --raft-heartbeat-timeout, --raft-election-timeout,", "# --raft-heartbeat-timeout, --raft-elections-timeout,", "--raft-elections-timeout"},
		{"another image", "image: ${EB_IMAGE:-edgebase:dev}", "image: ${EB_IMAGE:-edgebase:latest}", `image "edgebase:latest"`},
		{"wrong advertise", "EDGEBASE_ADVERTISE_RAFT: e-us:7000", "EDGEBASE_ADVERTISE_RAFT: e-eu:7000", `"e-us": EDGEBASE_ADVERTISE_RAFT`},
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			if !strings.Contains(src, m.old) {
				t.Fatalf("the file no longer contains %q: update this mutation", m.old)
			}
			probs := composeProblems(t, []byte(strings.Replace(src, m.old, m.new, 1)), true)
			if !slices.ContainsFunc(probs, func(p string) bool { return strings.Contains(p, m.want) }) {
				t.Fatalf("replacing %q with %q: problems %q, want one mentioning %q", m.old, m.new, probs, m.want)
			}
		})
	}
	t.Run("not YAML", func(t *testing.T) {
		probs := composeProblems(t, []byte(strings.Replace(src, "services:\n", "services:\n\t", 1)), true)
		if len(probs) == 0 || !strings.Contains(probs[0], "yaml") {
			t.Fatalf("problems %q, want the YAML error first", probs)
		}
	})
}

// TestRegionsComposeConfig renders the file with the tools that deploy it,
// `docker-compose config` (or `docker compose config`) for the one-machine
// try-out and `docker stack config` for a swarm (neither needs a running
// engine), and runs the same checks on what they render: the tools accept
// the file, and the placement and flags survive their loading. Skipped
// without the tools unless EDGEBASE_REQUIRE_DOCKER=1.
func TestRegionsComposeConfig(t *testing.T) {
	path := repoRoot(t) + "/" + regionsCompose
	var env []string // the variables at their defaults
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "EB_") && !strings.HasPrefix(kv, "COMPOSE_") {
			env = append(env, kv)
		}
	}
	type tool struct {
		name string
		cmd  []string
	}
	var tools []tool
	if p, err := exec.LookPath("docker-compose"); err == nil {
		tools = append(tools, tool{"docker-compose config", []string{p, "-f", path, "config"}})
	} else if _, err := runTool(env, "docker", "compose", "version"); err == nil {
		tools = append(tools, tool{"docker compose config", []string{"docker", "compose", "-f", path, "config"}})
	}
	if _, err := runTool(env, "docker", "stack", "config", "--help"); err == nil {
		tools = append(tools, tool{"docker stack config", []string{"docker", "stack", "config", "-c", path}})
	}
	if len(tools) == 0 {
		if os.Getenv("EDGEBASE_REQUIRE_DOCKER") == "1" {
			t.Fatal("EDGEBASE_REQUIRE_DOCKER=1 but neither docker-compose, docker compose nor docker stack is available")
		}
		t.Skip("skipping: neither docker-compose, docker compose nor docker stack is available (EDGEBASE_REQUIRE_DOCKER=1 turns this into a failure)")
	}
	for _, tl := range tools {
		t.Run(strings.ReplaceAll(tl.name, " ", "_"), func(t *testing.T) {
			out, err := runTool(env, tl.cmd[0], tl.cmd[1:]...)
			if err != nil {
				t.Fatalf("%s: %v\n%s", tl.name, err, out)
			}
			for _, p := range composeProblems(t, []byte(out), false) {
				t.Errorf("as rendered by %s: %s", tl.name, p)
			}
		})
	}
}

// runTool runs a command with a time limit and returns its standard output
// (and standard error, on failure).
func runTool(env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out) + stderr.String(), fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return string(out), nil
}

// composeProblems lists every way a compose file (raw: as written, with
// variables; else as a tool rendered it) falls short.
func composeProblems(t *testing.T, src []byte, raw bool) []string {
	t.Helper()
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }

	text := string(src)
	if raw {
		text = interpolate(text)
	}
	var f composeFile
	if err := yaml.Unmarshal([]byte(text), &f); err != nil {
		return []string{fmt.Sprintf("yaml: %v", err)}
	}
	flags := binaryFlags(t)

	// The image of docker-compose.yml.
	var base struct {
		XNode struct {
			Image string `yaml:"image"`
		} `yaml:"x-node"`
	}
	if err := yaml.Unmarshal(mustRead(t, "docker-compose.yml"), &base); err != nil || base.XNode.Image == "" {
		t.Fatalf("docker-compose.yml: no x-node image (%v)", err)
	}

	type node struct {
		name, region string
		edge         bool
	}
	want := []node{{"v-us1", "us", false}, {"v-us2", "us", false}, {"v-eu1", "eu", false},
		{"e-us", "us", true}, {"e-eu", "eu", true}, {"e-ap", "ap", true}}
	byName := map[string]node{}
	for _, n := range want {
		byName[n.name] = n
	}
	if names := slices.Sorted(maps.Keys(f.Services)); !slices.Equal(names, slices.Sorted(maps.Keys(byName))) {
		bad("services %v, want %v", names, slices.Sorted(maps.Keys(byName)))
	}

	bootstrappers := 0
	volumes := map[string]string{}
	published := map[string]string{}
	secrets := []string{"EDGEBASE_ADMIN_TOKEN", "EDGEBASE_CLUSTER_SECRET", "EDGEBASE_SECRET_KEY"}
	for _, n := range want {
		s, ok := f.Services[n.name]
		if !ok {
			continue
		}
		sbad := func(format string, args ...any) { bad("service %q: %s", n.name, fmt.Sprintf(format, args...)) }
		if s.Image != base.XNode.Image {
			sbad("image %q, want %q (docker-compose.yml's)", s.Image, base.XNode.Image)
		}
		if len(s.Command) == 0 || s.Command[0] != "serve" {
			sbad("command %q, want serve", s.Command)
		}
		if !slices.Contains(s.Command, "--wan") {
			sbad("command %q lacks --wan (the Raft timing preset for inter-region round trips)", s.Command)
		}
		for _, a := range s.Command {
			if v := flagVar(a); v != "" && !flags[v] {
				sbad("argument %q (%s) is not a flag of the edgebase binary", a, v)
			}
		}
		for k := range s.Environment {
			if strings.HasPrefix(k, "EDGEBASE_") && !flags[k] {
				sbad("sets %s, which is not a flag of the edgebase binary", k)
			}
		}
		env := s.Environment
		if env["EDGEBASE_NODE_ID"] != n.name {
			sbad("EDGEBASE_NODE_ID %q, want %q", env["EDGEBASE_NODE_ID"], n.name)
		}
		if v := env["EDGEBASE_ADVERTISE_HTTP"]; v != "http://"+n.name+":8080" {
			sbad("EDGEBASE_ADVERTISE_HTTP %q, want http://%s:8080", v, n.name)
		}
		if v := env["EDGEBASE_ADVERTISE_RAFT"]; v != n.name+":7000" {
			sbad("EDGEBASE_ADVERTISE_RAFT %q, want %s:7000", v, n.name)
		}
		if (env["EDGEBASE_EDGE"] == "true") != n.edge {
			sbad("EDGEBASE_EDGE %q, want edge=%v", env["EDGEBASE_EDGE"], n.edge)
		}
		if raw {
			for _, k := range secrets {
				if _, ok := env[k]; ok {
					sbad("sets the secret %s in the file: secrets come from the env file (EB_ENV_FILE)", k)
				}
			}
			if s.EnvFile == nil {
				sbad("no env_file: the secrets come from it")
			}
		} else {
			for _, k := range secrets {
				if env[k] == "" {
					sbad("%s is empty once rendered (the env file must provide it)", k)
				}
			}
		}
		if !slices.Contains(s.Healthcheck.Test, "healthcheck") {
			sbad("healthcheck %q, want `edgebase healthcheck` (GET /readyz)", s.Healthcheck.Test)
		}

		// Placement: its region, and a voter pinned to its host.
		var regions []string
		pinned := false
		for _, c := range s.Deploy.Placement.Constraints {
			k, v, ok := strings.Cut(c, "==")
			if !ok {
				continue
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			switch k {
			case "node.labels.region":
				regions = append(regions, v)
			case "node.labels.edgebase_voter":
				pinned = v == n.name
			}
		}
		if !slices.Equal(regions, []string{n.region}) {
			sbad("placement constraints %q: want node.labels.region == %s", s.Deploy.Placement.Constraints, n.region)
		}
		if !n.edge && !pinned {
			sbad("placement constraints %q: a voter must be pinned to its host (node.labels.edgebase_voter == %s): its state is in a local volume", s.Deploy.Placement.Constraints, n.name)
		}
		if len(s.Deploy.RestartPolicy) == 0 {
			sbad("no deploy.restart_policy (a swarm ignores restart:)")
		}

		// Join: one voter bootstraps; every other node names only voters,
		// all of them but itself, the nearest first.
		join := env["EDGEBASE_JOIN"]
		if join == "" {
			bootstrappers++
			if n.edge {
				sbad("an edge node without EDGEBASE_JOIN would bootstrap a cluster")
			}
		} else {
			var got []string
			for _, u := range strings.Split(join, ",") {
				host := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(u), "http://"), ":8080")
				got = append(got, host)
				if m, ok := byName[host]; !ok || m.edge || host == n.name {
					sbad("join list %q names %q, want only the other voters", join, u)
				}
			}
			var others []string
			for _, m := range want {
				if !m.edge && m.name != n.name {
					others = append(others, m.name)
				}
			}
			if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(others))) {
				sbad("join list %q, want every other voter %v", join, others)
			}
			if len(got) > 0 {
				first := byName[got[0]]
				for _, m := range want {
					if !m.edge && m.name != n.name && rtt(n.region, m.region) < rtt(n.region, first.region) {
						sbad("join list %q starts with %s (%s), but %s (%s) is nearer to %s", join, first.name, first.region, m.name, m.region, n.region)
						break
					}
				}
			}
		}

		// Its own volume at /data, and its own host port.
		for _, v := range s.Volumes {
			vol, target := "", ""
			switch v := v.(type) {
			case string:
				parts := strings.Split(v, ":")
				if len(parts) >= 2 {
					vol, target = parts[0], parts[1]
				}
			case map[string]any:
				vol, _ = v["source"].(string)
				target, _ = v["target"].(string)
			}
			if target != "/data" {
				continue
			}
			if other, dup := volumes[vol]; dup {
				sbad("volume %q at /data is also %q's", vol, other)
			}
			volumes[vol] = n.name
			if _, declared := f.Volumes[vol]; !declared {
				sbad("volume %q is not a named volume of the file", vol)
			}
		}
		if !slices.Contains(slices.Collect(maps.Values(volumes)), n.name) {
			sbad("no named volume at /data")
		}
		for _, p := range s.Ports {
			m, ok := p.(map[string]any)
			if !ok {
				sbad("port %v: want the long syntax (target, published, mode: host)", p)
				continue
			}
			pub := fmt.Sprint(m["published"])
			if _, err := strconv.Atoi(pub); err != nil {
				sbad("published port %q is not a number", pub)
			}
			if fmt.Sprint(m["target"]) != "8080" {
				sbad("port target %v, want 8080 (HTTP)", m["target"])
			}
			if other, dup := published[pub]; dup {
				sbad("host port %s is also %q's", pub, other)
			}
			published[pub] = n.name
		}
	}
	if bootstrappers != 1 {
		bad("%d nodes without EDGEBASE_JOIN: exactly one voter must bootstrap", bootstrappers)
	}
	if raw {
		probs = append(probs, mentionedFlagProblems(string(src), flags)...)
	}
	return probs
}
