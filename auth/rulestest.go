package auth

import (
	"context"
	"errors"
	"strings"
)

// Explanation is how a rules document decides one access: the decision of
// Allow, and which rule made it.
type Explanation struct {
	// Allowed is Allow's answer.
	Allowed bool
	// Rule is the index of the deciding rule (the first whose pattern
	// matches the path), -1 when no rule matches (then access is denied).
	Rule int
	// Match and Expression are that rule's pattern and its expression for
	// the operation ("" when no rule matches; an empty expression denies).
	Match      string
	Expression string
	// Err is why the expression failed to evaluate (then Allowed is
	// false), nil when it evaluated.
	Err error
}

// Explain decides op on in.Path exactly as Allow does (the same code), and
// says which rule decided: what the rules editor's "test" shows.
func (c *CompiledRules) Explain(ctx context.Context, op Op, in RuleInput) Explanation {
	ok, i, err := c.decide(ctx, op, in)
	e := Explanation{Allowed: ok, Rule: i, Err: err}
	if i >= 0 && i < len(c.src.Rules) {
		r := c.src.Rules[i]
		e.Match = r.Match
		e.Expression = r.Read
		if op == OpWrite {
			e.Expression = r.Write
		}
	}
	return e
}

// ErrorText is Err's message without the ErrRuleEval prefix every
// evaluation error carries ("rules[1].read: no such key: owner"), or "".
func (e Explanation) ErrorText() string {
	if e.Err == nil {
		return ""
	}
	msg := e.Err.Error()
	if errors.Is(e.Err, ErrRuleEval) {
		msg = strings.TrimPrefix(msg, ErrRuleEval.Error()+": ")
	}
	return msg
}

// AuthInfo is the account as the access rules see it when it is the
// caller: what the Decider derives from the committed account (its id,
// role and email).
func (u *User) AuthInfo() AuthInfo {
	return AuthInfo{UID: u.ID, Role: u.Role, Email: u.Email}
}
