package triggers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/push"
	"github.com/edgebase/edgebase/raftstore"
)

// Limits of a definition's expressions and actions.
const (
	// MaxExprLen bounds one CEL expression (condition, userIdFrom, or one
	// {{ }} part of a template), in bytes, as the access rules do.
	MaxExprLen = 4096
	// MaxTemplateLen bounds one template's text, in bytes.
	MaxTemplateLen = 16 << 10
	// MaxTemplateExprs bounds the {{ }} parts of one definition.
	MaxTemplateExprs = 200
	// MaxURLLen bounds a webhook URL, in bytes.
	MaxURLLen = 2048
	// MinSecretLen and MaxSecretLen bound a webhook secret an owner sends.
	MinSecretLen = 16
	MaxSecretLen = 256
	// MaxHeaders bounds a webhook's extra headers; MaxHeaderValueLen one value.
	MaxHeaders        = 20
	MaxHeaderValueLen = 4096

	// maxSealedLen bounds a stored sealed secret.
	maxSealedLen = 1024
	// costLimit bounds one evaluation, in CEL cost units (as the rules).
	costLimit = 1_000_000
	// interruptEvery is how many comprehension iterations run between
	// checks of the context.
	interruptEvery = 100
	// maxValueDepth bounds the nesting of a rendered value (as the API's
	// JSON limit).
	maxValueDepth = 64
	// maxUserIDLen bounds a user id given by userIdFrom.
	maxUserIDLen = 256
)

// ErrRender marks a failure to render an action for a change (an
// expression failed, or its result is not an acceptable path, value,
// user or topic): retrying cannot help, so the runner dead-letters it.
var ErrRender = errors.New("triggers: rendering the action failed")

// Change is one committed change of a user document, as a trigger sees it.
type Change struct {
	Project  string
	Path     string // project-relative
	Revision uint64
	Type     string          // TypeCreate, TypeUpdate, TypeDelete
	Before   json.RawMessage // nil: absent
	After    json.RawMessage // nil: absent (deleted)
	Time     time.Time       // commit time
	Depth    int
}

// ChangeFromEvent turns a feed event into a Change; false when the event is
// not of a user document (a system path, or a reserved "_" segment).
func ChangeFromEvent(ev raftstore.Event, depth int) (Change, bool) {
	pid, rel, ok := strings.Cut(ev.Path, "/")
	if !ok || pid == "" || rel == "" || strings.HasPrefix(pid, "_") || pid == raftstore.SystemPrefix {
		return Change{}, false
	}
	for _, seg := range strings.Split(rel, "/") {
		if seg == "" || keys.IsReserved(seg) {
			return Change{}, false
		}
	}
	ch := Change{Project: pid, Path: rel, Revision: ev.Revision, Depth: depth}
	if ev.Time != 0 {
		ch.Time = time.Unix(0, ev.Time).UTC()
	}
	if ev.Before != nil {
		ch.Before = ev.Before.Data
	}
	switch ev.Type {
	case raftstore.EventDelete:
		ch.Type = TypeDelete
	case raftstore.EventSet:
		ch.Type = TypeUpdate
		if ev.Before == nil {
			ch.Type = TypeCreate
		}
		if ev.Doc != nil {
			ch.After = ev.Doc.Data
		}
	default:
		return Change{}, false
	}
	return ch, true
}

// FieldError is a refused definition member. Field names it as JSON spells
// it: "match", "condition", "action.webhook.url", "action.push.data.k".
type FieldError struct{ Field, Message string }

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// ValidName reports whether name is a trigger name: [A-Za-z0-9][A-Za-z0-9_-]*,
// at most MaxNameLen bytes.
func ValidName(name string) bool {
	if name == "" || len(name) > MaxNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// Validate checks a definition as an owner sends it, expressions and
// templates compiled (no network: the webhook host is the Service's to
// check), and fills its defaults (Name, On). Problems are *FieldError.
// A stored secret (sealed) passes too.
func Validate(name string, d *Definition) error {
	_, err := compile("", name, d, 0)
	return err
}

// Compiled is a definition ready to run: its pattern parsed and its
// expressions and templates compiled. It is immutable and safe for
// concurrent use.
type Compiled struct {
	Project, Name string
	Def           Definition
	DefRevision   uint64

	pattern auth.Pattern
	on      map[string]bool
	cond    cel.Program // nil: always
	push    *compiledPush
	write   *compiledWrite
}

type compiledPush struct {
	userID      cel.Program
	topic       *template
	title, body *template
	data        map[string]*template
}

type compiledWrite struct {
	collection *template
	// data, value, by and values are JSON trees whose string leaves with
	// expressions are *template (see compileJSON).
	data, value, by, values any
}

// Compile validates d (see Validate) and compiles it for project pid;
// defRevision is the CreateRevision of its stored definition.
func Compile(pid, name string, d *Definition, defRevision uint64) (*Compiled, error) {
	return compile(pid, name, d, defRevision)
}

func compile(pid, name string, d *Definition, defRevision uint64) (*Compiled, error) {
	if !ValidName(name) {
		return nil, fieldErr("name", "a name is 1 to %d letters, digits, _ and -, starting with a letter or digit", MaxNameLen)
	}
	if d.Name == "" {
		d.Name = name
	} else if d.Name != name {
		return nil, fieldErr("name", "name %q does not match the trigger's name %q", d.Name, name)
	}
	c := &Compiled{Project: pid, Name: name, DefRevision: defRevision}
	var err error
	if c.pattern, err = auth.ParsePattern(d.Match); err != nil {
		return nil, fieldErr("match", "%v", err)
	}
	for _, v := range c.pattern.Vars() {
		if strings.HasPrefix(v, "_") {
			return nil, fieldErr("match", "variable %q: names starting with _ are reserved", v)
		}
	}
	if len(d.On) == 0 {
		d.On = []string{TypeCreate, TypeUpdate, TypeDelete}
	}
	c.on = make(map[string]bool, len(d.On))
	for i, t := range d.On {
		switch t {
		case TypeCreate, TypeUpdate, TypeDelete:
		default:
			return nil, fieldErr(fmt.Sprintf("on[%d]", i), "%q is not an event type: use create, update or delete", t)
		}
		if c.on[t] {
			return nil, fieldErr(fmt.Sprintf("on[%d]", i), "%q is listed twice", t)
		}
		c.on[t] = true
	}
	env, err := newEnv()
	if err != nil {
		return nil, fmt.Errorf("triggers: building CEL environment: %w", err)
	}
	if strings.TrimSpace(d.Condition) != "" {
		if c.cond, err = compileExpr(env, d.Condition, cel.BoolType); err != nil {
			return nil, fieldErr("condition", "%v", err)
		}
	}
	a := d.Action
	n := 0
	for _, set := range []bool{a.Webhook != nil, a.Push != nil, a.Write != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, fieldErr("action", "an action is exactly one of webhook, push or write (got %d)", n)
	}
	budget := MaxTemplateExprs
	switch {
	case a.Webhook != nil:
		err = validateWebhook(a.Webhook)
	case a.Push != nil:
		c.push, err = compilePush(env, a.Push, &budget)
	case a.Write != nil:
		c.write, err = compileWrite(env, a.Write, &budget)
	}
	if err != nil {
		return nil, err
	}
	c.Def = cloneDef(d)
	return c, nil
}

// cloneDef copies d so a Compiled does not share the caller's maps/slices.
func cloneDef(d *Definition) Definition {
	out := *d
	out.On = append([]string(nil), d.On...)
	if w := d.Action.Webhook; w != nil {
		cw := *w
		if w.Headers != nil {
			cw.Headers = make(map[string]string, len(w.Headers))
			for k, v := range w.Headers {
				cw.Headers[k] = v
			}
		}
		out.Action.Webhook = &cw
	}
	if p := d.Action.Push; p != nil {
		cp := *p
		if p.Data != nil {
			cp.Data = make(map[string]string, len(p.Data))
			for k, v := range p.Data {
				cp.Data[k] = v
			}
		}
		out.Action.Push = &cp
	}
	if w := d.Action.Write; w != nil {
		cw := *w
		out.Action.Write = &cw
	}
	return out
}

// newEnv declares the variables of conditions, userIdFrom and templates:
//
//	before, after  dyn: the document's data before and after the change
//	               (null when absent); decoded from JSON as the access
//	               rules do, so every number is a double (after.n * 2.0)
//	path           string: the project-relative document path
//	revision       int: the change's revision
//	type           string: create, update or delete
//	time           timestamp: the commit's time
//	params         map(string, string): the variables match bound
func newEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("before", cel.DynType),
		cel.Variable("after", cel.DynType),
		cel.Variable("path", cel.StringType),
		cel.Variable("revision", cel.IntType),
		cel.Variable("type", cel.StringType),
		cel.Variable("time", cel.TimestampType),
		cel.Variable("params", cel.MapType(cel.StringType, cel.StringType)),
		// Document numbers arrive as doubles; let "after.n > 10" work.
		cel.CrossTypeNumericComparisons(true),
	)
}

// compileExpr compiles one expression; want, when set, is the type it must
// have (a string may also be dyn, checked when it runs).
func compileExpr(env *cel.Env, src string, want *cel.Type) (cel.Program, error) {
	if len(src) > MaxExprLen {
		return nil, fmt.Errorf("expression is %d bytes, at most %d are allowed", len(src), MaxExprLen)
	}
	ast, iss := env.Compile(src)
	if err := iss.Err(); err != nil {
		return nil, err
	}
	if want != nil {
		t := ast.OutputType()
		ok := t.IsExactType(want) || (want == cel.StringType && t.IsExactType(cel.DynType))
		if !ok {
			return nil, fmt.Errorf("expression must be of type %s, not %s", want, t)
		}
	}
	return env.Program(ast, cel.CostLimit(costLimit), cel.InterruptCheckFrequency(interruptEvery))
}

// hopByHop are the headers a proxy consumes (RFC 9110 7.6.1) and others the
// delivery sets itself.
var refusedHeaders = map[string]bool{
	"connection": true, "keep-alive": true, "proxy-authenticate": true, "proxy-authorization": true,
	"proxy-connection": true, "te": true, "trailer": true, "transfer-encoding": true, "upgrade": true,
	"content-type": true, "content-length": true, "content-encoding": true, "host": true,
	"user-agent": true, "idempotency-key": true,
}

func validateWebhook(w *Webhook) error {
	const f = "action.webhook."
	if w.URL == "" {
		return fieldErr(f+"url", "url is required")
	}
	if len(w.URL) > MaxURLLen {
		return fieldErr(f+"url", "url is longer than %d bytes", MaxURLLen)
	}
	u, err := url.Parse(w.URL)
	if err != nil {
		return fieldErr(f+"url", "url is not a valid URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fieldErr(f+"url", "url must be an http or https URL")
	case u.User != nil:
		return fieldErr(f+"url", "url must not hold a user name or password (send a header instead)")
	case u.Hostname() == "":
		return fieldErr(f+"url", "url has no host")
	}
	if s := w.Secret; s != "" {
		if strings.HasPrefix(s, sealedPrefix) {
			if len(s) > maxSealedLen {
				return fieldErr(f+"secret", "sealed secret is too long")
			}
		} else {
			if n := utf8.RuneCountInString(s); n < MinSecretLen || n > MaxSecretLen {
				return fieldErr(f+"secret", "secret must be %d to %d characters", MinSecretLen, MaxSecretLen)
			}
			for _, r := range s {
				if r < 0x21 || r == 0x7f {
					return fieldErr(f+"secret", "secret must not hold spaces or control characters")
				}
			}
		}
	}
	if len(w.Headers) > MaxHeaders {
		return fieldErr(f+"headers", "at most %d headers are allowed", MaxHeaders)
	}
	seen := make(map[string]bool, len(w.Headers))
	for name, v := range w.Headers {
		hf := f + "headers." + name
		if !validToken(name) {
			return fieldErr(hf, "%q is not a valid header name", name)
		}
		lower := strings.ToLower(name)
		if refusedHeaders[lower] || strings.HasPrefix(lower, "edgebase-") {
			return fieldErr(hf, "header %s is set by the delivery and may not be given", name)
		}
		if seen[lower] {
			return fieldErr(hf, "header %s is given twice", name)
		}
		seen[lower] = true
		if len(v) > MaxHeaderValueLen {
			return fieldErr(hf, "header value is longer than %d bytes", MaxHeaderValueLen)
		}
		for i := 0; i < len(v); i++ {
			if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
				return fieldErr(hf, "header value must not hold control characters")
			}
		}
	}
	return nil
}

// validToken reports whether s is an RFC 9110 token (a header name).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func compilePush(env *cel.Env, p *PushAction, budget *int) (*compiledPush, error) {
	const f = "action.push."
	cp := &compiledPush{}
	var err error
	switch p.To {
	case "user":
		if strings.TrimSpace(p.UserIDFrom) == "" {
			return nil, fieldErr(f+"userIdFrom", "userIdFrom (a CEL expression giving the user id) is required with to: user")
		}
		if cp.userID, err = compileExpr(env, p.UserIDFrom, cel.StringType); err != nil {
			return nil, fieldErr(f+"userIdFrom", "%v", err)
		}
	case "topic", "project":
		if p.UserIDFrom != "" {
			return nil, fieldErr(f+"userIdFrom", "userIdFrom is only used with to: user")
		}
	case "":
		return nil, fieldErr(f+"to", "to is required: user, topic or project")
	default:
		return nil, fieldErr(f+"to", "to must be user, topic or project")
	}
	if p.To == "topic" {
		if strings.TrimSpace(p.Topic) == "" {
			return nil, fieldErr(f+"topic", "topic is required with to: topic")
		}
		if cp.topic, err = compileTemplate(env, p.Topic, budget); err != nil {
			return nil, fieldErr(f+"topic", "%v", err)
		}
		if s, ok := cp.topic.static(); ok {
			if err := push.ValidateTopic(s); err != nil {
				return nil, pushFieldErr(f, err)
			}
		}
	} else if p.Topic != "" {
		return nil, fieldErr(f+"topic", "topic is only used with to: topic")
	}
	switch p.Category {
	case "", push.CategoryGeneral, push.CategoryMarketing, push.CategorySecurity:
	default:
		return nil, fieldErr(f+"category", "category must be general, marketing or security")
	}
	if strings.TrimSpace(p.Title) == "" {
		return nil, fieldErr(f+"title", "title is required")
	}
	if cp.title, err = compileTemplate(env, p.Title, budget); err != nil {
		return nil, fieldErr(f+"title", "%v", err)
	}
	if cp.body, err = compileTemplate(env, p.Body, budget); err != nil {
		return nil, fieldErr(f+"body", "%v", err)
	}
	// What is static is checked as push would: keys, lengths.
	probe := push.Content{Title: "x", Category: p.Category}
	if s, ok := cp.title.static(); ok {
		probe.Title = s
	}
	if s, ok := cp.body.static(); ok {
		probe.Body = s
	}
	if len(p.Data) > 0 {
		cp.data = make(map[string]*template, len(p.Data))
		probe.Data = make(map[string]string, len(p.Data))
	}
	for k, v := range p.Data {
		if cp.data[k], err = compileTemplate(env, v, budget); err != nil {
			return nil, fieldErr(f+"data."+k, "%v", err)
		}
		probe.Data[k], _ = cp.data[k].static()
	}
	if err := probe.Validate(); err != nil {
		return nil, pushFieldErr(f, err)
	}
	return cp, nil
}

// pushFieldErr turns push's refusal into a FieldError under prefix.
func pushFieldErr(prefix string, err error) error {
	var pe *push.Error
	if errors.As(err, &pe) {
		return fieldErr(prefix+pe.Field(), "%s", pe.Message())
	}
	return fieldErr(strings.TrimSuffix(prefix, "."), "%v", err)
}

// writeMembers lists, per op, the members it takes besides op and collection.
var writeMembers = map[string][]string{
	"set":             {"data"},
	"update":          {"oldKey", "newKey", "value", "type"},
	"delete":          {},
	"deleteField":     {"field"},
	"increment":       {"field", "by"},
	"serverTimestamp": {"field"},
	"arrayUnion":      {"field", "values"},
	"arrayRemove":     {"field", "values"},
}

var valueTypes = map[string]bool{
	"string": true, "number": true, "integer": true, "boolean": true,
	"object": true, "array": true, "null": true, "timestamp": true,
}

func compileWrite(env *cel.Env, w *WriteAction, budget *int) (*compiledWrite, error) {
	const f = "action.write."
	members, ok := writeMembers[w.Op]
	if !ok {
		if w.Op == "" {
			return nil, fieldErr(f+"op", "op is required")
		}
		return nil, fieldErr(f+"op", "op must be one of set, update, delete, deleteField, increment, serverTimestamp, arrayUnion, arrayRemove")
	}
	given := map[string]bool{
		"data": len(w.Data) > 0, "oldKey": w.OldKey != "", "newKey": w.NewKey != "",
		"value": len(w.Value) > 0, "type": w.Type != "", "field": w.Field != "",
		"by": len(w.By) > 0, "values": len(w.Values) > 0,
	}
	for _, m := range members {
		delete(given, m)
	}
	for _, m := range []string{"data", "oldKey", "newKey", "value", "type", "field", "by", "values"} {
		if given[m] {
			return nil, fieldErr(f+m, "%s is not used by op %s", m, w.Op)
		}
	}
	cw := &compiledWrite{}
	var err error
	if strings.TrimSpace(w.Collection) == "" {
		return nil, fieldErr(f+"collection", "collection is required")
	}
	if cw.collection, err = compileTemplate(env, w.Collection, budget); err != nil {
		return nil, fieldErr(f+"collection", "%v", err)
	}
	if s, ok := cw.collection.static(); ok {
		if err := raftstore.ValidatePath(s); err != nil {
			return nil, fieldErr(f+"collection", "%v", err)
		}
	}
	for _, m := range members {
		switch m {
		case "field":
			if w.Field == "" {
				return nil, fieldErr(f+"field", "field is required")
			}
			if len(w.Field) > raftstore.MaxPathBytes {
				return nil, fieldErr(f+"field", "field names are at most %d bytes", raftstore.MaxPathBytes)
			}
		case "oldKey", "newKey":
			k := w.OldKey
			if m == "newKey" {
				k = w.NewKey
			}
			if k == "" {
				return nil, fieldErr(f+m, "%s is required", m)
			}
			if len(k) > raftstore.MaxPathBytes {
				return nil, fieldErr(f+m, "field names are at most %d bytes", raftstore.MaxPathBytes)
			}
		case "type":
			if w.Type != "" && !valueTypes[w.Type] {
				return nil, fieldErr(f+"type", "type must be one of string, number, integer, boolean, object, array, null, timestamp")
			}
		case "data":
			if t := bytes.TrimSpace(w.Data); len(t) == 0 || t[0] != '{' {
				return nil, fieldErr(f+"data", "data is required and must be a JSON object")
			}
			if len(w.Data) > raftstore.MaxDocumentSize {
				return nil, fieldErr(f+"data", "data is larger than %d bytes", raftstore.MaxDocumentSize)
			}
			if cw.data, err = compileJSON(env, w.Data, budget); err != nil {
				return nil, fieldErr(f+"data", "%v", err)
			}
		case "value":
			if len(w.Value) == 0 {
				return nil, fieldErr(f+"value", "value is required")
			}
			if cw.value, err = compileJSON(env, w.Value, budget); err != nil {
				return nil, fieldErr(f+"value", "%v", err)
			}
		case "by":
			if len(w.By) == 0 {
				return nil, fieldErr(f+"by", "by is required")
			}
			if cw.by, err = compileJSON(env, w.By, budget); err != nil {
				return nil, fieldErr(f+"by", "%v", err)
			}
			switch b := cw.by.(type) {
			case json.Number:
			case *template:
				if !b.single() {
					return nil, fieldErr(f+"by", "by must be a number or a single {{ expression }}")
				}
			default:
				return nil, fieldErr(f+"by", "by must be a number")
			}
		case "values":
			if len(w.Values) == 0 {
				return nil, fieldErr(f+"values", "values is required")
			}
			if cw.values, err = compileJSON(env, w.Values, budget); err != nil {
				return nil, fieldErr(f+"values", "%v", err)
			}
			if _, ok := cw.values.([]any); !ok {
				return nil, fieldErr(f+"values", "values must be a JSON array")
			}
		}
	}
	return cw, nil
}

// compileJSON decodes raw (refusing repeated keys and numbers beyond
// float64) into a tree whose string leaves holding {{ }} are *template.
func compileJSON(env *cel.Env, raw json.RawMessage, budget *int) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeTree(dec, env, budget, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("is not a single JSON value")
	}
	return v, nil
}

func decodeTree(dec *json.Decoder, env *cel.Env, budget *int, depth int) (any, error) {
	if depth > maxValueDepth {
		return nil, fmt.Errorf("nests deeper than %d levels", maxValueDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, errors.New("is not valid JSON")
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			m := map[string]any{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, errors.New("is not valid JSON")
				}
				k, ok := kt.(string)
				if !ok {
					return nil, errors.New("is not valid JSON")
				}
				if _, dup := m[k]; dup {
					return nil, fmt.Errorf("has the key %q twice in one object", k)
				}
				if m[k], err = decodeTree(dec, env, budget, depth+1); err != nil {
					return nil, err
				}
			}
			if _, err := dec.Token(); err != nil {
				return nil, errors.New("is not valid JSON")
			}
			return m, nil
		case '[':
			l := []any{}
			for dec.More() {
				e, err := decodeTree(dec, env, budget, depth+1)
				if err != nil {
					return nil, err
				}
				l = append(l, e)
			}
			if _, err := dec.Token(); err != nil {
				return nil, errors.New("is not valid JSON")
			}
			return l, nil
		}
		return nil, errors.New("is not valid JSON")
	case json.Number:
		if f, err := strconv.ParseFloat(string(t), 64); err != nil || math.IsInf(f, 0) {
			return nil, fmt.Errorf("has the number %s, which does not fit a 64-bit float", t)
		}
		return t, nil
	case string:
		if !strings.Contains(t, "{{") {
			return t, nil
		}
		tp, err := compileTemplate(env, t, budget)
		if err != nil {
			return nil, err
		}
		return tp, nil
	}
	return tok, nil // bool, nil
}

// renderTree evaluates the templates of a compileJSON tree.
func renderTree(ctx context.Context, v any, act map[string]any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			r, err := renderTree(ctx, e, act)
			if err != nil {
				return nil, err
			}
			m[k] = r
		}
		return m, nil
	case []any:
		l := make([]any, len(v))
		for i, e := range v {
			r, err := renderTree(ctx, e, act)
			if err != nil {
				return nil, err
			}
			l[i] = r
		}
		return l, nil
	case *template:
		return v.value(ctx, act)
	}
	return v, nil
}

// renderJSON renders a tree to compact JSON within the nesting limit.
func renderJSON(ctx context.Context, v any, act map[string]any) (json.RawMessage, error) {
	r, err := renderTree(ctx, v, act)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encoding the value: %w", err)
	}
	if raftstore.JSONDepth(b) > maxValueDepth {
		return nil, fmt.Errorf("value nests deeper than %d levels", maxValueDepth)
	}
	return b, nil
}

// activation binds the event's variables; before and after are decoded
// only when an expression reads them (once per activation: CEL keeps the
// value), so an activation serves one call's evaluations in sequence.
func activation(ch *Change, params map[string]string) map[string]any {
	if params == nil {
		params = map[string]string{}
	}
	return map[string]any{
		"before":   lazyJSON(ch.Before),
		"after":    lazyJSON(ch.After),
		"path":     ch.Path,
		"revision": int64(ch.Revision),
		"type":     ch.Type,
		"time":     ch.Time,
		"params":   params,
	}
}

func lazyJSON(raw json.RawMessage) func() any {
	return func() any {
		if len(raw) == 0 {
			return types.NullValue
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return types.NewErr("decoding document data: %v", err)
		}
		if v == nil {
			return types.NullValue
		}
		return v
	}
}

// Fires reports whether ch fires the trigger: same project, an event type
// it is on, a path its pattern matches (params: the bound variables), and
// its condition true. err: the condition failed to evaluate (not fired).
// Disabled and the loop depth are the runner's to judge.
func (c *Compiled) Fires(ctx context.Context, ch *Change) (params map[string]string, fire bool, err error) {
	if ch.Project != c.Project || !c.on[ch.Type] {
		return nil, false, nil
	}
	params, ok := c.pattern.Match(ch.Path)
	if !ok {
		return nil, false, nil
	}
	if c.cond == nil {
		return params, true, nil
	}
	out, _, err := c.cond.ContextEval(ctx, activation(ch, params))
	if err != nil {
		return nil, false, fmt.Errorf("triggers: %s: condition: %w", c.Name, err)
	}
	b, ok := out.Value().(bool)
	if !ok {
		return nil, false, fmt.Errorf("triggers: %s: condition is %s, not bool", c.Name, out.Type())
	}
	return params, b, nil
}

// PushMessage is a rendered push action.
type PushMessage struct {
	To       string // user, topic, project
	UserID   string
	Topic    string
	Title    string
	Body     string
	Category string // filled: general when the definition gives none
	Data     map[string]string
}

// RenderPush renders the push action for ch. Errors wrap ErrRender.
func (c *Compiled) RenderPush(ctx context.Context, ch *Change, params map[string]string) (PushMessage, error) {
	p := c.Def.Action.Push
	if c.push == nil || p == nil {
		return PushMessage{}, fmt.Errorf("%w: trigger %s has no push action", ErrRender, c.Name)
	}
	act := activation(ch, params)
	fail := func(member string, err error) (PushMessage, error) {
		return PushMessage{}, fmt.Errorf("%w: %s: action.push.%s: %w", ErrRender, c.Name, member, err)
	}
	m := PushMessage{To: p.To, Category: p.Category}
	var err error
	if c.push.userID != nil {
		v, err := evalNative(ctx, c.push.userID, act)
		if err != nil {
			return fail("userIdFrom", err)
		}
		s, ok := v.(string)
		if !ok {
			return fail("userIdFrom", fmt.Errorf("user id is %T, not a string", v))
		}
		if err := checkUserID(s); err != nil {
			return fail("userIdFrom", err)
		}
		m.UserID = s
	}
	if c.push.topic != nil {
		if m.Topic, err = c.push.topic.render(ctx, act); err != nil {
			return fail("topic", err)
		}
		if err := push.ValidateTopic(m.Topic); err != nil {
			return fail("topic", err)
		}
	}
	if m.Title, err = c.push.title.render(ctx, act); err != nil {
		return fail("title", err)
	}
	if m.Body, err = c.push.body.render(ctx, act); err != nil {
		return fail("body", err)
	}
	if len(c.push.data) > 0 {
		m.Data = make(map[string]string, len(c.push.data))
		for k, t := range c.push.data {
			if m.Data[k], err = t.render(ctx, act); err != nil {
				return fail("data."+k, err)
			}
		}
	}
	content := push.Content{Title: m.Title, Body: m.Body, Data: m.Data, Category: m.Category}
	if err := content.Validate(); err != nil {
		return fail("content", err)
	}
	m.Category = content.Category
	return m, nil
}

// checkUserID refuses what cannot be a user id in a key.
func checkUserID(s string) error {
	switch {
	case s == "":
		return errors.New("user id is empty")
	case len(s) > maxUserIDLen:
		return fmt.Errorf("user id is longer than %d bytes", maxUserIDLen)
	case strings.HasPrefix(s, "_") || s == "." || s == "..":
		return fmt.Errorf("user id %q is not valid", s)
	}
	for _, r := range s {
		if r == '/' || r < 0x20 || r == 0x7f {
			return fmt.Errorf("user id %q is not valid", s)
		}
	}
	return nil
}

// RenderWrite renders the derived write for ch: its op on the full path
// keys.Doc(project, rendered collection), validated as a batch write is.
// A delete of an absent document is no error (IfExists), so a redelivery
// succeeds. Errors wrap ErrRender.
func (c *Compiled) RenderWrite(ctx context.Context, ch *Change, params map[string]string) (raftstore.Op, error) {
	w := c.Def.Action.Write
	var op raftstore.Op
	if c.write == nil || w == nil {
		return op, fmt.Errorf("%w: trigger %s has no write action", ErrRender, c.Name)
	}
	act := activation(ch, params)
	fail := func(member string, err error) (raftstore.Op, error) {
		return raftstore.Op{}, fmt.Errorf("%w: %s: action.write.%s: %w", ErrRender, c.Name, member, err)
	}
	coll, err := c.write.collection.render(ctx, act)
	if err != nil {
		return fail("collection", err)
	}
	if err := raftstore.ValidatePath(coll); err != nil {
		return fail("collection", fmt.Errorf("%q: %w", coll, err))
	}
	if keys.IsReserved(coll) {
		return fail("collection", fmt.Errorf("%q is reserved", coll))
	}
	op.Path = keys.Doc(c.Project, coll)
	render := func(member string, v any) (json.RawMessage, error) {
		b, err := renderJSON(ctx, v, act)
		if err != nil {
			_, err = fail(member, err)
		}
		return b, err
	}
	switch w.Op {
	case "set":
		op.Kind = raftstore.OpPut
		if op.Data, err = render("data", c.write.data); err != nil {
			return raftstore.Op{}, err
		}
		if len(op.Data) == 0 || op.Data[0] != '{' {
			return fail("data", errors.New("data is not a JSON object"))
		}
		if len(op.Data) > raftstore.MaxDocumentSize {
			return fail("data", fmt.Errorf("a document may be at most %d bytes", raftstore.MaxDocumentSize))
		}
	case "update":
		v, err := render("value", c.write.value)
		if err != nil {
			return raftstore.Op{}, err
		}
		if err := checkType(v, w.Type); err != nil {
			return fail("value", err)
		}
		if len(v) > raftstore.MaxDocumentSize {
			return fail("value", fmt.Errorf("value is larger than %d bytes", raftstore.MaxDocumentSize))
		}
		op.Kind, op.Field, op.Data = raftstore.OpSetField, w.OldKey, v
		if w.OldKey != w.NewKey {
			op.Kind, op.NewField = raftstore.OpRenameField, w.NewKey
		}
	case "delete":
		op.Kind, op.IfExists = raftstore.OpDelete, true
	case "deleteField":
		op.Kind, op.Field = raftstore.OpDeleteField, w.Field
	case "serverTimestamp":
		op.Kind, op.Field = raftstore.OpServerTimestamp, w.Field
	case "increment":
		op.Kind, op.Field = raftstore.OpIncrement, w.Field
		b, err := render("by", c.write.by)
		if err != nil {
			return raftstore.Op{}, err
		}
		if len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) {
			return fail("by", fmt.Errorf("by is %s, not a number", b))
		}
		op.Data = b
	case "arrayUnion", "arrayRemove":
		op.Kind, op.Field = raftstore.OpArrayUnion, w.Field
		if w.Op == "arrayRemove" {
			op.Kind = raftstore.OpArrayRemove
		}
		if op.Data, err = render("values", c.write.values); err != nil {
			return raftstore.Op{}, err
		}
		if len(op.Data) > raftstore.MaxDocumentSize {
			return fail("values", fmt.Errorf("values are larger than %d bytes", raftstore.MaxDocumentSize))
		}
	default:
		return fail("op", fmt.Errorf("unknown op %q", w.Op))
	}
	return op, nil
}

// checkType checks a rendered value against the declared type, as
// PUT /api/db does.
func checkType(v json.RawMessage, typ string) error {
	if typ == "" {
		return nil
	}
	first := v[0]
	ok := true
	switch typ {
	case "string":
		ok = first == '"'
	case "number":
		ok = first == '-' || ('0' <= first && first <= '9')
	case "integer":
		f, err := strconv.ParseFloat(string(v), 64)
		ok = err == nil && f == math.Trunc(f) && !bytes.ContainsAny(v, ".eE")
	case "boolean":
		ok = string(v) == "true" || string(v) == "false"
	case "object":
		ok = first == '{'
	case "array":
		ok = first == '['
	case "null":
		ok = string(v) == "null"
	case "timestamp":
		var ts string
		if first != '"' || json.Unmarshal(v, &ts) != nil {
			ok = false
		} else if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
			return errors.New("a timestamp must be an RFC 3339 string")
		}
	}
	if !ok {
		return fmt.Errorf("value %s is not of type %s", v, typ)
	}
	return nil
}

// NewPayload is the webhook body (and the parked event's record) of ch for
// trigger c.
func NewPayload(c *Compiled, ch *Change, params map[string]string) Payload {
	p := Payload{
		ID:       c.Name + ":" + strconv.FormatUint(ch.Revision, 10) + ":" + url.PathEscape(ch.Path),
		Trigger:  c.Name,
		Project:  ch.Project,
		Revision: ch.Revision,
		Path:     ch.Path,
		Type:     ch.Type,
		Before:   ch.Before,
		After:    ch.After,
		Time:     ch.Time.UTC().Format(time.RFC3339Nano),
	}
	if len(params) > 0 {
		p.Params = params
	}
	return p
}
