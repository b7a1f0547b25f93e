package auth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// LimitRule allows Max failed attempts per fixed Window. The window starts at
// the first failure and ends Window later, whatever happens in between, so a
// lock always ends: nobody can hold an account locked beyond the window
// without failing again, and the failures of a locked key are not counted.
type LimitRule struct {
	Max    int
	Window time.Duration
}

// Limits are the brute-force limits. They count failures only (a wrong
// password, a wrong or replayed code, an unknown verify token), are kept in
// the replicated tree so that they hold across nodes, and are checked before
// any password or code is looked at.
//
// The per-account-and-address rule trips long before the per-account one, so
// one attacking address locks itself out, not the account's owner; only many
// addresses together reach the per-account ceiling (ASVS 2.2.1: at most 100
// failed attempts per hour on one account).
type Limits struct {
	// PasswordPerAccountAddr bounds wrong passwords (login, change-password)
	// for one account from one client address.
	PasswordPerAccountAddr LimitRule
	// PasswordPerAccount bounds wrong passwords for one account from anywhere.
	PasswordPerAccount LimitRule
	// CodePerAccountAddr bounds wrong TOTP or recovery codes (login-verify,
	// authenticator verify, disable-totp) for one account from one address.
	CodePerAccountAddr LimitRule
	// CodePerAccount bounds wrong codes for one account from anywhere.
	CodePerAccount LimitRule
	// PerAddr bounds all failures of one client address, whatever the account
	// or project (credential stuffing across accounts, bogus verify tokens).
	PerAddr LimitRule
	// RegisterPerAddr bounds the accounts one client address registers
	// (successes, not failures: each grows the state).
	RegisterPerAddr LimitRule
	// RegisterPerProject bounds the accounts a project gains from anywhere.
	RegisterPerProject LimitRule
	// EmailSendPerAccount bounds the emails with a code (verification,
	// reset, sign-in, change of address) asked for one address of a project,
	// whether or not it has an account (counted on every request alike).
	EmailSendPerAccount LimitRule
	// EmailSendPerAddr bounds the code emails one client address asks for.
	EmailSendPerAddr LimitRule
}

// DefaultLimits are the limits used unless configured.
func DefaultLimits() Limits {
	return Limits{
		PasswordPerAccountAddr: LimitRule{Max: 10, Window: 15 * time.Minute},
		PasswordPerAccount:     LimitRule{Max: 100, Window: time.Hour},
		CodePerAccountAddr:     LimitRule{Max: 10, Window: 15 * time.Minute},
		CodePerAccount:         LimitRule{Max: 30, Window: time.Hour},
		PerAddr:                LimitRule{Max: 300, Window: 15 * time.Minute},
		RegisterPerAddr:        LimitRule{Max: 100, Window: time.Hour},
		RegisterPerProject:     LimitRule{Max: 10000, Window: time.Hour},
		EmailSendPerAccount:    LimitRule{Max: 5, Window: 15 * time.Minute},
		EmailSendPerAddr:       LimitRule{Max: 50, Window: 15 * time.Minute},
	}
}

// RateLimitError is returned when an attempt is refused by a limit.
type RateLimitError struct {
	// RetryAfter is when the limit that refused the attempt ends.
	RetryAfter time.Duration
	// Registrations says the limit counts registrations, not failures.
	Registrations bool
	// Sends says the limit counts emails asked for (email codes).
	Sends bool
}

// ErrRateLimited is what every *RateLimitError matches with errors.Is.
var ErrRateLimited = errors.New("too many failed attempts; try again later")

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("%s (retry after %s)", ErrRateLimited, e.RetryAfter)
}

// Is makes errors.Is(err, ErrRateLimited) true.
func (e *RateLimitError) Is(target error) bool { return target == ErrRateLimited }

// attemptKind selects which account rules apply to an attempt.
type attemptKind int

const (
	kindPassword attemptKind = iota
	kindCode
	kindReset
	kindRegister // a registration: counted when it succeeds
	// kindEmailSend is a request for a code by email: counted on every
	// request, whether or not the address has an account.
	kindEmailSend
)

// attempt is who tries what: the project and account (by normalised email,
// so unknown emails are limited exactly like known ones) and the client
// address. An empty addr (an in-process caller) skips the address rules.
type attempt struct {
	kind   attemptKind
	action string // what is attempted, for the rate-limited metric
	pid    string
	email  string
	addr   string
}

// bucket is one counter of failures.
type bucket struct {
	N     int   `json:"n"`
	Reset int64 `json:"reset"` // Unix seconds at which the window ends
}

type boundRule struct {
	path string
	rule LimitRule
	name string // the rule's name, the first part of path (audit detail)
}

// rules lists the buckets an attempt counts against.
func (s *Service) rules(a attempt) []boundRule {
	email := NormalizeEmail(a.email)
	var out []boundRule
	add := func(r LimitRule, parts ...string) {
		if r.Max > 0 && r.Window > 0 {
			out = append(out, boundRule{path: keys.Limit(parts...), rule: r, name: parts[0]})
		}
	}
	switch a.kind {
	case kindPassword:
		add(s.limits.PasswordPerAccount, "password", a.pid, email)
		if a.addr != "" {
			add(s.limits.PasswordPerAccountAddr, "password+addr", a.pid, email, a.addr)
		}
	case kindCode:
		add(s.limits.CodePerAccount, "code", a.pid, email)
		if a.addr != "" {
			add(s.limits.CodePerAccountAddr, "code+addr", a.pid, email, a.addr)
		}
	case kindReset:
		// A verify token carries 256 random bits: guessing is hopeless, so only
		// the address rule applies.
	case kindRegister:
		add(s.limits.RegisterPerProject, "register", a.pid)
		if a.addr != "" {
			add(s.limits.RegisterPerAddr, "register+addr", a.addr)
		}
		return out
	case kindEmailSend:
		add(s.limits.EmailSendPerAccount, "emailsend", a.pid, email)
		if a.addr != "" {
			add(s.limits.EmailSendPerAddr, "emailsend+addr", a.addr)
		}
		return out
	}
	if a.addr != "" {
		add(s.limits.PerAddr, "addr", a.addr)
	}
	return out
}

// checkLimits refuses an attempt whose buckets are full. It reads this node's
// applied state: the callers make a strong read first, so failures recorded
// through any node count here. Callers check before the work, so a locked
// key costs no hashing.
func (s *Service) checkLimits(a attempt) error {
	_, err := s.limitGate(a)
	return err
}

// limitGate is checkLimits for revealing a success: besides refusing when a
// bucket is full, it returns conditions on the buckets' current revisions.
// The commit that reveals the success carries them, so a failure counted
// meanwhile (a concurrent guess that filled the bucket) fails that commit;
// the caller then looks again and answers 429 if the bucket is now full. A
// right guess racing a filling limit is therefore withheld like the rest.
func (s *Service) limitGate(a attempt) ([]raftstore.Cond, error) {
	now := s.now().Unix()
	var wait int64
	var conds []raftstore.Cond
	for _, br := range s.rules(a) {
		doc, err := s.store.Get(br.path)
		if err != nil {
			return nil, err
		}
		var rev uint64
		if doc != nil {
			rev = doc.Revision
			var b bucket
			if err := decodeJSON(doc, &b); err != nil {
				return nil, err
			}
			if now < b.Reset && b.N >= br.rule.Max && b.Reset-now > wait {
				wait = b.Reset - now
			}
		}
		conds = append(conds, raftstore.Cond{Path: br.path, Kind: raftstore.CondRevision, Revision: rev})
	}
	if wait > 0 {
		s.metrics.limited(a.action)
		return nil, &RateLimitError{RetryAfter: time.Duration(wait) * time.Second, Registrations: a.kind == kindRegister, Sends: a.kind == kindEmailSend}
	}
	return conds, nil
}

// The compare-and-set loops below retry until the request's context ends:
// every conflict means another writer's commit went through, so the loops
// make progress as a whole, and a fixed cap would turn a burst of
// concurrent guesses into uncounted failures.

// recordFailure counts a failed attempt in every bucket, atomically: one
// transaction conditioned on the revisions it read, retried on conflict. It
// is also the gate that makes the limits exact under concurrency: when a
// bucket is already full at the moment of the compare-and-set, the failure is
// not counted and the caller answers with the returned *RateLimitError
// instead of "wrong", so however many guesses run at once, at most Max of
// them per window are ever answered.
func (s *Service) recordFailure(ctx context.Context, a attempt) error {
	release, err := s.holdFailGate(ctx)
	if err != nil {
		return fmt.Errorf("record failed attempt: %w", err)
	}
	defer release()
	// Someone else counting a failure meanwhile makes this one count again.
	res, _, err := raftstore.Guarded(ctx, s.store, func() (*raftstore.Txn, error) {
		txn := &raftstore.Txn{Time: s.now().UnixNano()}
		if err := s.addFailure(txn, a); err != nil {
			return nil, err
		}
		if len(txn.Ops) == 0 {
			return nil, errNothingToCount
		}
		return txn, nil
	})
	if errors.Is(err, errNothingToCount) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("record failed attempt: %w", err)
	}
	if !res.OK() {
		return fmt.Errorf("record failed attempt: refused: %s", res.Err)
	}
	return nil
}

// errNothingToCount ends recordFailure's loop when no limit applies.
var errNothingToCount = errors.New("no limit counts this attempt")

// holdFailGate takes this node's failure-counting turn.
func (s *Service) holdFailGate(ctx context.Context) (func(), error) {
	select {
	case s.failGate <- struct{}{}:
		return func() { <-s.failGate }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// addFailure adds to txn the increments of a's buckets, each conditioned on
// the revision it read, or returns a *RateLimitError when a bucket is full
// already. Callers that must change other records with the same failure (a
// login ticket's count) put both in one transaction, so a conflict never
// counts a failure twice.
func (s *Service) addFailure(txn *raftstore.Txn, a attempt) error {
	now := s.now()
	var wait int64
	for _, br := range s.rules(a) {
		doc, err := s.store.Get(br.path)
		if err != nil {
			return err
		}
		var b bucket
		var rev uint64
		if doc != nil {
			rev = doc.Revision
			if err := decodeJSON(doc, &b); err != nil {
				return err
			}
		}
		full := false
		switch {
		case doc == nil || now.Unix() >= b.Reset:
			b = bucket{N: 1, Reset: now.Add(br.rule.Window).Unix()}
		case b.N >= br.rule.Max:
			wait = max(wait, b.Reset-now.Unix())
			full = true
		default:
			b.N++
		}
		txn.Conds = append(txn.Conds, raftstore.Cond{Path: br.path, Kind: raftstore.CondRevision, Revision: rev})
		txn.Ops = append(txn.Ops, raftstore.Op{Kind: raftstore.OpPut, Path: br.path, Data: mustJSON(b)})
		if !full && b.N == br.rule.Max {
			// audit: the failure that fills a bucket, once per window (the
			// bucket's revision condition makes it the only one).
			if op, ok := s.thresholdAudit(a, br.name); ok {
				txn.Ops = append(txn.Ops, op)
			}
		}
	}
	if wait > 0 {
		s.metrics.limited(a.action)
		return &RateLimitError{RetryAfter: time.Duration(wait) * time.Second, Registrations: a.kind == kindRegister, Sends: a.kind == kindEmailSend}
	}
	return nil
}

// clearAccountAddr returns the op that forgets the account-and-address
// password failures after a successful login from that address (nil when
// there is nothing to forget), so one typo-prone user does not accumulate
// towards a lock over many days.
func (s *Service) clearAccountAddr(a attempt) *raftstore.Op {
	if a.addr == "" {
		return nil
	}
	p := keys.Limit("password+addr", a.pid, NormalizeEmail(a.email), a.addr)
	if doc, err := s.store.Get(p); err != nil || doc == nil {
		return nil
	}
	return &raftstore.Op{Kind: raftstore.OpDelete, Path: p, IfExists: true}
}
