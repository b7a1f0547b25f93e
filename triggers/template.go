package triggers

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

// Templates are text with {{ expr }} parts, each a CEL expression over the
// event (see newEnv). "{{" always opens an expression; the expression ends
// at the first "}}" outside string literals and braces, so map literals
// work inside it.

// tmplPart is a literal run of text (prg nil) or a compiled expression.
type tmplPart struct {
	text string
	prg  cel.Program
}

// template is a compiled template.
type template struct {
	parts []tmplPart
}

// splitTemplate cuts src into literal text and expression sources; exprs[i]
// reports whether parts[i] is an expression.
func splitTemplate(src string) (parts []string, exprs []bool, err error) {
	for src != "" {
		i := strings.Index(src, "{{")
		if i < 0 {
			parts, exprs = append(parts, src), append(exprs, false)
			break
		}
		if i > 0 {
			parts, exprs = append(parts, src[:i]), append(exprs, false)
		}
		src = src[i+2:]
		end := exprEnd(src)
		if end < 0 {
			return nil, nil, errors.New(`"{{" is not closed by "}}"`)
		}
		expr := strings.TrimSpace(src[:end])
		if expr == "" {
			return nil, nil, errors.New(`"{{ }}" holds no expression`)
		}
		parts, exprs = append(parts, expr), append(exprs, true)
		src = src[end+2:]
	}
	return parts, exprs, nil
}

// exprEnd finds the "}}" closing an expression that starts at s[0]: the
// first one outside quotes and braces opened within the expression. -1: none.
func exprEnd(s string) int {
	depth := 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if quote != 0 {
			switch c {
			case '\\':
				i++
			case quote:
				quote = 0
			}
			continue
		}
		switch c {
		case '\'', '"':
			quote = c
		case '{':
			depth++
		case '}':
			if depth == 0 {
				if i+1 < len(s) && s[i+1] == '}' {
					return i
				}
				continue
			}
			depth--
		}
	}
	return -1
}

// compileTemplate compiles src; its expressions may have any type.
func compileTemplate(env *cel.Env, src string, budget *int) (*template, error) {
	if len(src) > MaxTemplateLen {
		return nil, fmt.Errorf("template is %d bytes, at most %d are allowed", len(src), MaxTemplateLen)
	}
	parts, exprs, err := splitTemplate(src)
	if err != nil {
		return nil, err
	}
	t := &template{parts: make([]tmplPart, len(parts))}
	for i, p := range parts {
		if !exprs[i] {
			t.parts[i].text = p
			continue
		}
		if *budget--; *budget < 0 {
			return nil, fmt.Errorf("a definition may hold at most %d template expressions", MaxTemplateExprs)
		}
		if t.parts[i].prg, err = compileExpr(env, p, nil); err != nil {
			return nil, fmt.Errorf("{{ %s }}: %w", p, err)
		}
	}
	return t, nil
}

// static reports whether the template holds no expression, and its text.
func (t *template) static() (string, bool) {
	var b strings.Builder
	for _, p := range t.parts {
		if p.prg != nil {
			return "", false
		}
		b.WriteString(p.text)
	}
	return b.String(), true
}

// single reports whether the template is exactly one expression.
func (t *template) single() bool { return len(t.parts) == 1 && t.parts[0].prg != nil }

// render evaluates the template to text: strings as they are, null as "",
// anything else as compact JSON.
func (t *template) render(ctx context.Context, act map[string]any) (string, error) {
	var b strings.Builder
	for _, p := range t.parts {
		if p.prg == nil {
			b.WriteString(p.text)
			continue
		}
		v, err := evalNative(ctx, p.prg, act)
		if err != nil {
			return "", err
		}
		switch v := v.(type) {
		case nil:
		case string:
			b.WriteString(v)
		default:
			j, err := json.Marshal(v)
			if err != nil {
				return "", fmt.Errorf("encoding a template value: %w", err)
			}
			b.Write(j)
		}
	}
	return b.String(), nil
}

// value evaluates a template that is a single expression to its JSON
// value; any other template renders to a string.
func (t *template) value(ctx context.Context, act map[string]any) (any, error) {
	if t.single() {
		return evalNative(ctx, t.parts[0].prg, act)
	}
	return t.render(ctx, act)
}

// evalNative evaluates prg and converts the result to a JSON-ready value.
func evalNative(ctx context.Context, prg cel.Program, act map[string]any) (any, error) {
	out, _, err := prg.ContextEval(ctx, act)
	if err != nil {
		return nil, err
	}
	return toNative(out, 0)
}

// toNative turns a CEL value into what encoding/json writes: nil, bool,
// int64, uint64, float64, string, []any, map[string]any. Timestamps become
// RFC 3339 strings, durations Go duration strings, bytes base64.
func toNative(v ref.Val, depth int) (any, error) {
	if depth > maxValueDepth {
		return nil, fmt.Errorf("value nests deeper than %d levels", maxValueDepth)
	}
	switch v := v.(type) {
	case *types.Err:
		return nil, v
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(v), nil
	case types.Int:
		return int64(v), nil
	case types.Uint:
		return uint64(v), nil
	case types.Double:
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("value %v is not a JSON number", f)
		}
		return f, nil
	case types.String:
		return string(v), nil
	case types.Bytes:
		return base64.StdEncoding.EncodeToString(v), nil
	case types.Timestamp:
		return v.UTC().Format(time.RFC3339Nano), nil
	case types.Duration:
		return v.Duration.String(), nil
	case traits.Mapper:
		m := make(map[string]any)
		it := v.Iterator()
		for it.HasNext() == types.True {
			k := it.Next()
			var key string
			switch k := k.(type) {
			case types.String:
				key = string(k)
			case types.Int:
				key = strconv.FormatInt(int64(k), 10)
			case types.Uint:
				key = strconv.FormatUint(uint64(k), 10)
			case types.Bool:
				key = strconv.FormatBool(bool(k))
			default:
				return nil, fmt.Errorf("map key of type %s cannot be a JSON key", k.Type())
			}
			e, err := toNative(v.Get(k), depth+1)
			if err != nil {
				return nil, err
			}
			m[key] = e
		}
		return m, nil
	case traits.Lister:
		n, ok := v.Size().(types.Int)
		if !ok {
			return nil, errors.New("list has no size")
		}
		l := make([]any, 0, int(n))
		for i := types.Int(0); i < n; i++ {
			e, err := toNative(v.Get(i), depth+1)
			if err != nil {
				return nil, err
			}
			l = append(l, e)
		}
		return l, nil
	}
	return nil, fmt.Errorf("a value of type %s cannot be rendered", v.Type())
}
