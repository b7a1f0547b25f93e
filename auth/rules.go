package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
)

// Access rules decide, per project, who may read and write which documents.
// A rules document is an ordered list of path patterns, each with one CEL
// expression per operation; the first pattern that matches a path decides,
// and anything not explicitly allowed is denied.

// Limits on a rules document and its evaluation.
const (
	// MaxRules is the most rules a RuleSet may hold.
	MaxRules = 200
	// MaxRuleExprLen is the longest expression, in bytes.
	MaxRuleExprLen = 4096

	// Pattern limits mirror the limits on document paths.
	maxPatternLen      = 1500
	maxPatternSegments = 100

	// ruleCostLimit bounds one evaluation, in CEL cost units (roughly one
	// per operation), so a rule iterating over a large document cannot
	// stall a request.
	ruleCostLimit = 1_000_000
	// ruleInterruptEvery is how many comprehension iterations run between
	// checks of the context.
	ruleInterruptEvery = 100
)

// Rule is one entry of a rules document. Match is a path pattern; Read and
// Write are CEL expressions of type bool. An empty expression denies.
type Rule struct {
	Match string `json:"match"`
	Read  string `json:"read"`
	Write string `json:"write"`
}

// RuleSet is a project's rules document:
// {"rules":[{"match":"users/{uid}/**","read":"...","write":"..."}]}.
type RuleSet struct {
	Rules []Rule `json:"rules"`
}

// DefaultRules returns the rules a project starts with: owners may do
// anything; a user may read and write users/{their uid} and everything under
// it; nothing else is allowed.
func DefaultRules() RuleSet {
	const own = "auth.role == 'owner' || auth.uid == uid"
	const owner = "auth.role == 'owner'"
	return RuleSet{Rules: []Rule{
		{Match: "users/{uid}/**", Read: own, Write: own},
		{Match: "**", Read: owner, Write: owner},
	}}
}

// RuleError reports an invalid rules document. Index is the position of the
// offending rule, or -1 when the document as a whole is at fault; Part is
// "match", "read" or "write" (or "rules" when Index is -1). It wraps
// ErrInvalidRules.
type RuleError struct {
	Index int
	Part  string
	Msg   string
}

func (e *RuleError) Error() string {
	if e.Index < 0 {
		return e.Part + ": " + e.Msg
	}
	return fmt.Sprintf("rules[%d].%s: %s", e.Index, e.Part, e.Msg)
}

// Unwrap lets errors.Is(err, ErrInvalidRules) recognise every RuleError.
func (e *RuleError) Unwrap() error { return ErrInvalidRules }

// Op is the kind of access being checked.
type Op int

const (
	// OpRead covers getting a document, listing and subscribing.
	OpRead Op = iota + 1
	// OpWrite covers creating, replacing, updating and deleting.
	OpWrite
)

func (o Op) String() string {
	switch o {
	case OpRead:
		return "read"
	case OpWrite:
		return "write"
	default:
		return fmt.Sprintf("Op(%d)", int(o))
	}
}

// AuthInfo is the caller as rules see it (the CEL variable auth).
type AuthInfo struct {
	UID   string
	Role  string
	Email string
}

// RuleInput is one access to check.
type RuleInput struct {
	// Path is the document path, already validated, without a leading
	// slash, e.g. "users/abc/notes/n1".
	Path string
	Auth AuthInfo
	// Resource is the existing document's data, nil if there is none.
	Resource json.RawMessage
	// Request is the incoming data of a write, nil for reads and deletes.
	Request json.RawMessage
	// Time is request.time: a write's commit time (its proposer's clock,
	// carried in the entry), a read's time on the answering node. Zero
	// means now for a read, and leaves request.time unset for a write (an
	// expression using it then denies).
	Time time.Time
}

// CompiledRules is a validated, compiled RuleSet, ready to evaluate. It is
// immutable and safe for concurrent use; replace it as a whole when the rules
// change.
type CompiledRules struct {
	src   RuleSet
	rules []compiledRule
}

type compiledRule struct {
	pat   pattern
	read  cel.Program // nil: deny
	write cel.Program // nil: deny
	// readUses holds the identifiers the read expression refers to
	// (resource, auth, path variables...): how ReadScope tells whether a
	// read depends on the document's data or on the path below a prefix.
	readUses map[string]bool
}

// aliasable reports whether a path variable may also be declared as a
// top-level CEL variable. The four declared variables may not be shadowed, and
// CEL's reserved words would not parse as identifiers anyway; such variables
// stay reachable as path.name or path['name'].
func aliasable(name string) bool {
	switch name {
	case "auth", "path", "resource", "request",
		"true", "false", "null", "in", "as", "break", "const", "continue",
		"else", "for", "function", "if", "import", "let", "loop", "package",
		"namespace", "return", "var", "void", "while":
		return false
	}
	return true
}

// newRulesEnv builds the CEL environment shared by every rule of a
// CompiledRules. Building it is the slow part of compiling, so it is done
// once per CompileRules call and extended per rule.
func newRulesEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("auth", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("path", cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable("resource", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("request", cel.MapType(cel.StringType, cel.DynType)),
		// JSON numbers arrive as doubles; let "request.data.n < 10" work
		// without writing 10.0.
		cel.CrossTypeNumericComparisons(true),
	)
}

// CompileRules validates and compiles rs. Any problem is reported as a
// *RuleError naming the rule and field.
//
// The CEL variables available to expressions are:
//
//	auth      map: uid, role, email of the caller ("" when unknown)
//	path      map(string, string): the variables bound by the pattern
//	resource  map: data = the stored document's data, or null
//	request   map: data = the incoming data of a write, or null;
//	          path = the full document path; time = a timestamp: when
//	          the write commits (the time its proposer put in the entry),
//	          or when the read is answered
//
// and each pattern variable also as a top-level string (so a rule for
// "users/{uid}/**" can say auth.uid == uid), unless its name is one of the
// above or a CEL reserved word. Document data is decoded from JSON as-is, so
// every number is a double. Each expression must have type bool.
func CompileRules(rs RuleSet) (*CompiledRules, error) {
	if len(rs.Rules) > MaxRules {
		return nil, &RuleError{Index: -1, Part: "rules", Msg: fmt.Sprintf("at most %d rules are allowed, got %d", MaxRules, len(rs.Rules))}
	}
	base, err := newRulesEnv()
	if err != nil {
		return nil, fmt.Errorf("auth: building CEL environment: %w", err)
	}
	c := &CompiledRules{
		src:   RuleSet{Rules: append([]Rule(nil), rs.Rules...)},
		rules: make([]compiledRule, 0, len(rs.Rules)),
	}
	for i, r := range rs.Rules {
		pat, err := parsePattern(r.Match)
		if err != nil {
			return nil, &RuleError{Index: i, Part: "match", Msg: err.Error()}
		}
		env := base
		var decls []cel.EnvOption
		for _, name := range pat.vars {
			if aliasable(name) {
				decls = append(decls, cel.Variable(name, cel.StringType))
			}
		}
		if len(decls) > 0 {
			if env, err = base.Extend(decls...); err != nil {
				return nil, &RuleError{Index: i, Part: "match", Msg: err.Error()}
			}
		}
		cr := compiledRule{pat: pat}
		if cr.read, cr.readUses, err = compileRuleExpr(env, r.Read); err != nil {
			return nil, &RuleError{Index: i, Part: "read", Msg: err.Error()}
		}
		if cr.write, _, err = compileRuleExpr(env, r.Write); err != nil {
			return nil, &RuleError{Index: i, Part: "write", Msg: err.Error()}
		}
		c.rules = append(c.rules, cr)
	}
	return c, nil
}

// compileRuleExpr compiles one expression and names the identifiers it
// refers to (variables, and comprehension variables too: a superset).
func compileRuleExpr(env *cel.Env, src string) (cel.Program, map[string]bool, error) {
	if strings.TrimSpace(src) == "" {
		return nil, nil, nil
	}
	if len(src) > MaxRuleExprLen {
		return nil, nil, fmt.Errorf("expression is %d bytes, at most %d are allowed", len(src), MaxRuleExprLen)
	}
	ast, iss := env.Compile(src)
	if err := iss.Err(); err != nil {
		return nil, nil, err
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) {
		return nil, nil, fmt.Errorf("expression must be of type bool, not %s", t)
	}
	uses := map[string]bool{}
	for _, ref := range ast.NativeRep().ReferenceMap() {
		if len(ref.OverloadIDs) == 0 {
			uses[strings.TrimPrefix(ref.Name, ".")] = true
		}
	}
	prg, err := env.Program(ast,
		cel.CostLimit(ruleCostLimit),
		cel.InterruptCheckFrequency(ruleInterruptEvery),
	)
	return prg, uses, err
}

// Source returns the RuleSet the rules were compiled from, e.g. to serve GET
// /api/db/rules.
func (c *CompiledRules) Source() RuleSet {
	return RuleSet{Rules: append([]Rule(nil), c.src.Rules...)}
}

// Allow reports whether op on in.Path is allowed. The first rule whose
// pattern matches the path decides; if none matches, or its expression for
// op is empty, access is denied. An expression that fails to evaluate (a
// missing key, the cost limit, a cancelled ctx) also denies, and the error
// (wrapping ErrRuleEval) says why.
func (c *CompiledRules) Allow(ctx context.Context, op Op, in RuleInput) (bool, error) {
	ok, _, err := c.decide(ctx, op, in)
	return ok, err
}

// decide is Allow, also naming the deciding rule (-1: none matched). Allow
// and Explain share it, so an explanation is the decision itself.
func (c *CompiledRules) decide(ctx context.Context, op Op, in RuleInput) (bool, int, error) {
	if op != OpRead && op != OpWrite {
		return false, -1, fmt.Errorf("auth: unknown operation %v", op)
	}
	if err := ctx.Err(); err != nil {
		return false, -1, err
	}
	if op == OpRead && in.Time.IsZero() {
		// A read is judged where it is answered: request.time is now.
		// (A write's time is its entry's, the same on every node.)
		in.Time = time.Now().UTC()
	}
	segs := splitPath(in.Path)
	for i := range c.rules {
		r := &c.rules[i]
		vars, ok := r.pat.match(segs)
		if !ok {
			continue
		}
		prg := r.read
		if op == OpWrite {
			prg = r.write
		}
		if prg == nil {
			return false, i, nil
		}
		ok, err := evalRule(ctx, prg, i, op, in, vars)
		return ok, i, err
	}
	return false, -1, nil
}

// ReadScope is what the read rules say, for one caller, of a path and
// (asked for a subtree) every path under it.
type ReadScope uint8

const (
	// ReadNone: no document there may be read, whatever its data.
	ReadNone ReadScope = iota
	// ReadAll: every document there may be read, whatever its data.
	ReadAll
	// ReadByPath: ask Allow per document; its data never changes the
	// answer, its path does.
	ReadByPath
	// ReadByData: ask Allow per document; its data may change the answer.
	ReadByData
)

// ReadScope decides, from the path alone where it can, the read access of a
// to path and, with subtree, to every path below it, so that a caller
// judging many documents there (a listing, a subscription) evaluates a rule
// once instead of once per document. The first rule that can match a path
// there and matches all of them decides all of them when its read
// expression uses neither resource, nor request, nor a variable bound below
// path; otherwise the answer is per document (ReadByPath or ReadByData).
// An evaluation that fails denies, as in Allow.
func (c *CompiledRules) ReadScope(ctx context.Context, path string, subtree bool, a AuthInfo) ReadScope {
	segs := splitPath(path)
	some, byData := false, false
	for i := range c.rules {
		r := &c.rules[i]
		switch r.pat.reach(segs, subtree) {
		case reachNone:
			continue
		case reachSome:
			some = true
			byData = byData || r.readUses["resource"]
			continue
		}
		// r decides every path there that no earlier rule matches.
		if !some {
			return r.wholeScope(ctx, path, segs, a)
		}
		if byData || r.readUses["resource"] {
			return ReadByData
		}
		return ReadByPath
	}
	switch {
	case !some:
		return ReadNone
	case byData:
		return ReadByData
	}
	return ReadByPath
}

// wholeScope is the read scope of a rule that decides every path at and
// under segs.
func (r *compiledRule) wholeScope(ctx context.Context, path string, segs []string, a AuthInfo) ReadScope {
	if r.read == nil {
		return ReadNone
	}
	if r.readUses["resource"] {
		return ReadByData
	}
	vars := map[string]string{}
	for i, ps := range r.pat.segs {
		switch ps.kind {
		case segVar:
			vars[ps.text] = segs[i]
		case segRest:
			// Bound to what lies below path too: it varies.
			if r.readUses[ps.text] || r.readUses["path"] {
				return ReadByPath
			}
		}
	}
	if r.readUses["request"] {
		return ReadByPath // request.path varies
	}
	ok, _ := evalRule(ctx, r.read, 0, OpRead, RuleInput{Path: path, Auth: a}, vars)
	if ok {
		return ReadAll
	}
	return ReadNone
}

type reach uint8

const (
	reachNone reach = iota // matches no path there
	reachSome              // matches some
	reachAll               // matches every one
)

// reach tells which of segs and (with subtree) the paths below it p matches.
func (p *pattern) reach(segs []string, subtree bool) reach {
	for i, ps := range p.segs {
		if ps.kind == segGlob || ps.kind == segRest {
			return reachAll
		}
		if i >= len(segs) {
			// p needs more segments: it can match paths below only.
			if subtree {
				return reachSome
			}
			return reachNone
		}
		if ps.kind == segLiteral && segs[i] != ps.text {
			return reachNone
		}
	}
	switch {
	case len(p.segs) < len(segs):
		return reachNone
	case subtree:
		return reachSome // segs itself only
	}
	return reachAll
}

func evalRule(ctx context.Context, prg cel.Program, index int, op Op, in RuleInput, vars map[string]string) (bool, error) {
	fail := func(err error) (bool, error) {
		return false, fmt.Errorf("%w: rules[%d].%s: %w", ErrRuleEval, index, op, err)
	}
	resource, err := decodeRuleData(in.Resource)
	if err != nil {
		return fail(fmt.Errorf("decoding resource data: %w", err))
	}
	request, err := decodeRuleData(in.Request)
	if err != nil {
		return fail(fmt.Errorf("decoding request data: %w", err))
	}
	act := make(map[string]any, 4+len(vars))
	for name, v := range vars {
		act[name] = v
	}
	act["auth"] = map[string]any{"uid": in.Auth.UID, "role": in.Auth.Role, "email": in.Auth.Email}
	act["path"] = vars
	act["resource"] = map[string]any{"data": resource}
	req := map[string]any{"data": request, "path": in.Path}
	if !in.Time.IsZero() {
		req["time"] = in.Time
	}
	act["request"] = req

	out, _, err := prg.ContextEval(ctx, act)
	if err != nil {
		return fail(err)
	}
	b, ok := out.Value().(bool)
	if !ok {
		return fail(fmt.Errorf("result is %s, not bool", out.Type()))
	}
	return b, nil
}

// decodeRuleData turns stored or incoming JSON into the native values CEL
// understands: maps, slices, strings, bools, float64 and nil.
func decodeRuleData(raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

func splitPath(p string) []string {
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

type segKind uint8

const (
	segLiteral segKind = iota // matches itself
	segVar                    // {name}: exactly one segment, bound
	segGlob                   // **: zero or more segments, last only
	segRest                   // {name=**}: zero or more segments, bound, last only
)

type patSeg struct {
	kind segKind
	text string // the literal, or the variable name
}

type pattern struct {
	segs []patSeg
	vars []string // bound variable names, in order
}

// parsePattern validates and parses a match pattern such as
// "users/{uid}/**" or "files/{rest=**}".
func parsePattern(s string) (pattern, error) {
	var p pattern
	if s == "" {
		return p, fmt.Errorf("pattern is empty")
	}
	if len(s) > maxPatternLen {
		return p, fmt.Errorf("pattern is longer than %d bytes", maxPatternLen)
	}
	parts := strings.Split(s, "/")
	if len(parts) > maxPatternSegments {
		return p, fmt.Errorf("pattern has more than %d segments", maxPatternSegments)
	}
	seen := make(map[string]bool)
	for i, seg := range parts {
		last := i == len(parts)-1
		switch {
		case seg == "":
			return p, fmt.Errorf("pattern %q has an empty segment", s)
		case seg == "**":
			if !last {
				return p, fmt.Errorf("** must be the last segment of %q", s)
			}
			p.segs = append(p.segs, patSeg{kind: segGlob})
		case strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}"):
			name, glob, isRest := strings.Cut(seg[1:len(seg)-1], "=")
			kind := segVar
			if isRest {
				if glob != "**" {
					return p, fmt.Errorf("segment %q: only {name=**} may follow =", seg)
				}
				if !last {
					return p, fmt.Errorf("segment %q must be the last segment of %q", seg, s)
				}
				kind = segRest
			}
			if !isIdent(name) {
				return p, fmt.Errorf("segment %q: %q is not a valid variable name", seg, name)
			}
			if seen[name] {
				return p, fmt.Errorf("variable %q appears twice in %q", name, s)
			}
			seen[name] = true
			p.segs = append(p.segs, patSeg{kind: kind, text: name})
			p.vars = append(p.vars, name)
		case strings.ContainsAny(seg, "{}*"):
			return p, fmt.Errorf("segment %q: use a literal, {name}, {name=**} or a final **", seg)
		default:
			p.segs = append(p.segs, patSeg{kind: segLiteral, text: seg})
		}
	}
	return p, nil
}

// isIdent reports whether s is [A-Za-z_][A-Za-z0-9_]*.
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
		case i > 0 && '0' <= r && r <= '9':
		default:
			return false
		}
	}
	return true
}

// match reports whether the path segments match p, and the bound variables.
func (p *pattern) match(segs []string) (map[string]string, bool) {
	vars := make(map[string]string, len(p.vars))
	for i, ps := range p.segs {
		switch ps.kind {
		case segGlob:
			return vars, true
		case segRest:
			vars[ps.text] = strings.Join(segs[i:], "/")
			return vars, true
		}
		if i >= len(segs) {
			return nil, false
		}
		switch ps.kind {
		case segLiteral:
			if segs[i] != ps.text {
				return nil, false
			}
		case segVar:
			if segs[i] == "" {
				return nil, false
			}
			vars[ps.text] = segs[i]
		}
	}
	return vars, len(segs) == len(p.segs)
}

// Pattern is a parsed path pattern as the access rules spell them (literal
// segments, {name}, a final ** or {name=**}), exported so triggers match
// document paths exactly as rules do.
type Pattern struct{ p pattern }

// ParsePattern validates and parses a pattern such as "users/{uid}/**".
func ParsePattern(s string) (Pattern, error) {
	p, err := parsePattern(s)
	if err != nil {
		return Pattern{}, err
	}
	return Pattern{p: p}, nil
}

// Match reports whether relPath (a project-relative document path) matches
// the pattern, and the variables it binds.
func (p Pattern) Match(relPath string) (map[string]string, bool) {
	return p.p.match(splitPath(relPath))
}

// Vars lists the variables the pattern binds, in order.
func (p Pattern) Vars() []string { return append([]string(nil), p.p.vars...) }
