package auth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// Email codes prove that someone reads an address: a 6-digit code (and,
// when the project set an action URL, a link token) sent by email for one
// purpose. A code is single use, lasts EmailCodeTTL, is void after
// MaxEmailCodeFailures wrong tries, and wrong tries also count against the
// brute-force limits of codes (per account, per account and address, per
// address). Codes are stored as salted hashes and link tokens as hashes
// (HashToken), in one record per project, purpose and subject (a newer
// code replaces the older one).
//
// The requests that send a code to an address someone types
// (request-password-reset, request-email-code) answer the same and do the
// same work whether or not the address has an account: each renders an
// email and makes one commit (the count of the request against the
// email-send limits, plus, with an account, the code and its queued email).

// EmailCodeTTL is how long an email code (and its link) is valid.
const EmailCodeTTL = 10 * time.Minute

// MaxEmailCodeFailures wrong codes void an email code.
const MaxEmailCodeFailures = 5

// emailLinkPrefix marks the link tokens of emails.
const emailLinkPrefix = "ebe_"

// The purposes of email codes (a part of the record's key).
const (
	purposeVerify = "verify"
	purposeReset  = "reset"
	purposeSignIn = "sign-in"
	purposeChange = "change-email" // keyed by the account id: the new address is in the record
)

// The actions of email codes, anonymous sign-in and linking, for the
// rate-limited metric.
const (
	actionSendVerification = "send_verification"
	actionVerifyEmail      = "verify_email"
	actionRequestReset     = "request_password_reset"
	actionResetEmailCode   = "reset_password_email_code"
	actionRequestSignIn    = "request_email_code"
	actionLoginEmailCode   = "login_email_code"
	actionChangeEmail      = "change_email"
	actionAnonymous        = "sign_in_anonymously"
	actionLinkEmail        = "link_email"
)

// emailActions lists them (metrics creates their children up front).
var emailActions = []string{actionSendVerification, actionVerifyEmail, actionRequestReset, actionResetEmailCode,
	actionRequestSignIn, actionLoginEmailCode, actionChangeEmail, actionAnonymous, actionLinkEmail}

// emailCode is the stored record of a code.
type emailCode struct {
	ProjectID string `json:"projectId"`
	UserID    string `json:"userId"`
	Purpose   string `json:"purpose"`
	// Email is the address the code was sent to (normalized): the
	// account's, or the new one of a change of address.
	Email     string `json:"email"`
	Salt      string `json:"salt"`
	Hash      string `json:"hash"`
	LinkHash  string `json:"linkHash,omitempty"`
	ExpiresAt int64  `json:"expiresAt"`
	Failures  int    `json:"failures,omitempty"`
}

// emailLink is the record of a link token: which code it stands for.
type emailLink struct {
	Code string `json:"code"` // the code record's key
}

// codeHash is the stored form of a code: a salted hash bound to its project,
// purpose and address, so a record copied elsewhere proves nothing.
func codeHash(salt, pid, purpose, email, code string) string {
	return HashToken("emailcode\x00" + salt + "\x00" + pid + "\x00" + purpose + "\x00" + email + "\x00" + code)
}

// newCode returns 6 uniformly random decimal digits.
func newCode() (string, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(1_000_000))
	if err != nil {
		return "", fmt.Errorf("random code: %w", err)
	}
	return fmt.Sprintf("%06d", n.Int64()), nil
}

// emailCodePaths are the keys every code of account uid (with address
// email) may be stored at.
func (s *Service) emailCodePaths(pid, uid, email string) []string {
	paths := []string{keys.EmailCode(pid, purposeChange, uid)}
	if email != "" {
		for _, p := range []string{purposeVerify, purposeReset, purposeSignIn} {
			paths = append(paths, keys.EmailCode(pid, p, NormalizeEmail(email)))
		}
	}
	return paths
}

// codeSubject is the key part of a purpose's codes: the account id for a
// change of address, the normalized address otherwise.
func codeSubject(purpose, uid, email string) string {
	if purpose == purposeChange {
		return uid
	}
	return NormalizeEmail(email)
}

// linkMode is the mode of a purpose's link (the action page's ?mode=).
var linkMode = map[string]string{purposeVerify: "verify-email", purposeReset: "reset-password", purposeSignIn: "sign-in", purposeChange: "change-email"}

// emailKind is the email template of a purpose.
var emailKind = map[string]EmailKind{purposeVerify: EmailVerification, purposeReset: EmailPasswordReset, purposeSignIn: EmailSignInCode, purposeChange: EmailChange}

// issueCode returns the ops that store a new code of purpose for account
// uid, sent to address `to`, and queue its email (with a link when the
// project set an action URL); from is the account's address for the email's
// text. A code it replaces takes its link with it.
func (s *Service) issueCode(pid, uid, purpose, to, from string) ([]raftstore.Op, error) {
	code, err := newCode()
	if err != nil {
		return nil, err
	}
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return nil, fmt.Errorf("random salt: %w", err)
	}
	to = NormalizeEmail(to)
	path := keys.EmailCode(pid, purpose, codeSubject(purpose, uid, to))
	rec := emailCode{ProjectID: pid, UserID: uid, Purpose: purpose, Email: to, Salt: hex.EncodeToString(salt),
		ExpiresAt: s.now().Add(EmailCodeTTL).Unix()}
	rec.Hash = codeHash(rec.Salt, pid, purpose, to, code)
	var ops []raftstore.Op
	var old emailCode
	if ok, err := s.getJSON(path, &old); err != nil {
		return nil, err
	} else if ok && old.LinkHash != "" {
		ops = append(ops, raftstore.Op{Kind: raftstore.OpDelete, Path: keys.EmailLink(old.LinkHash), IfExists: true})
	}
	st, _, err := s.authSettings(pid)
	if err != nil {
		return nil, err
	}
	vars := EmailVars{Code: code, Email: from, ExpiresMinutes: int(EmailCodeTTL / time.Minute)}
	if purpose == purposeChange {
		vars.NewEmail = to
	}
	if st.EmailActionURL != "" {
		tok, err := NewToken(emailLinkPrefix)
		if err != nil {
			return nil, err
		}
		rec.LinkHash = HashToken(tok)
		vars.Link = actionLink(st.EmailActionURL, linkMode[purpose], tok, pid)
		ops = append(ops, raftstore.Op{Kind: raftstore.OpPut, Path: keys.EmailLink(rec.LinkHash), Data: mustJSON(emailLink{Code: path})})
	}
	ops = append(ops, raftstore.Op{Kind: raftstore.OpPut, Path: path, Data: mustJSON(rec)})
	mailOps, err := s.emailOps(pid, emailKind[purpose], to, vars)
	if err != nil {
		return nil, fmt.Errorf("queue %s email: %w", purpose, err)
	}
	return append(ops, mailOps...), nil
}

// requestCode serves the requests that send a code to an address someone
// types: one commit either way (see the top of the file). The account is
// judged at the commit: one deleted or created meanwhile makes it decide
// again.
func (s *Service) requestCode(ctx context.Context, pid, purpose, action, email, addr string) (uint64, error) {
	if err := ValidateEmail(email); err != nil {
		return 0, err
	}
	at := attempt{kind: kindEmailSend, action: action, pid: pid, email: email, addr: addr}
	if err := s.checkLimits(at); err != nil {
		return 0, err
	}
	res, _, err := raftstore.Guarded(ctx, s.store, func() (*raftstore.Txn, error) {
		txn := &raftstore.Txn{Time: s.now().UnixNano()}
		if err := s.addFailure(txn, at); err != nil {
			return nil, err
		}
		idx, err := s.store.Get(keys.Email(pid, email))
		if err != nil {
			return nil, err
		}
		var acc *account
		var rev uint64
		if idx != nil {
			var e emailIndex
			if err := decodeJSON(idx, &e); err != nil {
				return nil, err
			}
			if acc, rev, err = s.accountRev(pid, e.UserID); err != nil {
				return nil, err
			}
		}
		if acc == nil {
			// The same work as with an account: an email rendered (and
			// sealed), a code and a salt drawn; only the ops are dropped.
			if _, err := s.issueCode(pid, "", purpose, email, email); err != nil {
				return nil, err
			}
			txn.Conds = append(txn.Conds, raftstore.Cond{Path: keys.Email(pid, email), Kind: raftstore.CondRevision, Revision: revOf(idx)})
			return txn, nil
		}
		ops, err := s.issueCode(pid, acc.ID, purpose, acc.Email, acc.Email)
		if err != nil {
			return nil, err
		}
		txn.Conds = append(txn.Conds, raftstore.Cond{Path: keys.User(pid, acc.ID), Kind: raftstore.CondRevision, Revision: rev})
		txn.Ops = append(txn.Ops, ops...)
		return txn, nil
	})
	if err != nil {
		return 0, err
	}
	if !res.OK() {
		return 0, fmt.Errorf("request %s code refused: %s", purpose, res.Err)
	}
	return res.Revision, nil
}

func revOf(d *raftstore.Document) uint64 {
	if d == nil {
		return 0
	}
	return d.Revision
}

// RequestPasswordReset emails a password reset code to the account of email,
// if there is one; the answer is the same either way.
func (s *Service) RequestPasswordReset(ctx context.Context, pid, email, addr string) (uint64, error) {
	return s.requestCode(ctx, pid, purposeReset, actionRequestReset, email, addr)
}

// RequestEmailCode emails a sign-in code to the account of email, if there
// is one (it never creates an account); the answer is the same either way.
func (s *Service) RequestEmailCode(ctx context.Context, pid, email, addr string) (uint64, error) {
	return s.requestCode(ctx, pid, purposeSignIn, actionRequestSignIn, email, addr)
}

// SendVerification emails a verification code to the caller's address.
// already is true (and nothing is sent) when the address is verified.
func (s *Service) SendVerification(ctx context.Context, p *Principal, addr string) (already bool, rev uint64, err error) {
	acc, err := s.account(p.ProjectID, p.UserID)
	if err != nil {
		return false, 0, err
	}
	if acc == nil {
		return false, 0, ErrInvalidToken
	}
	if acc.Email == "" {
		return false, 0, ErrNoEmail
	}
	if acc.EmailVerified {
		return true, 0, nil
	}
	at := attempt{kind: kindEmailSend, action: actionSendVerification, pid: p.ProjectID, email: acc.Email, addr: addr}
	if err := s.checkLimits(at); err != nil {
		return false, 0, err
	}
	res, _, err := raftstore.Guarded(ctx, s.store, func() (*raftstore.Txn, error) {
		acc, rev, err := s.accountRev(p.ProjectID, p.UserID)
		if err != nil {
			return nil, err
		}
		if acc == nil {
			return nil, ErrInvalidToken
		}
		txn := &raftstore.Txn{Time: s.now().UnixNano(),
			Conds: []raftstore.Cond{{Path: keys.User(p.ProjectID, acc.ID), Kind: raftstore.CondRevision, Revision: rev}}}
		if err := s.addFailure(txn, at); err != nil {
			return nil, err
		}
		ops, err := s.issueCode(p.ProjectID, acc.ID, purposeVerify, acc.Email, acc.Email)
		if err != nil {
			return nil, err
		}
		txn.Ops = append(txn.Ops, ops...)
		return txn, nil
	})
	if err != nil {
		return false, 0, err
	}
	if !res.OK() {
		return false, 0, fmt.Errorf("send verification refused: %s", res.Err)
	}
	return false, res.Revision, nil
}

// redemption is a code (or link token) presented for a purpose.
type redemption struct {
	pid, purpose string
	// subject is the code's key part (codeSubject); unused with a token.
	subject string
	// email is the attempt's account for the limits (the address typed, or
	// the caller's).
	email       string
	code, token string
	// field names the request field of the code ("code", "emailCode").
	field  string
	action string
	addr   string
}

// errCodeVoid stops redeem's apply without counting a failure: the code is
// for an account or address that changed since it was sent.
var errCodeVoid = errors.New("email code void")

// redeem checks a code (or link token) and commits apply's txn with the
// code's consumption, conditioned on the code as read and on the limits
// (limitGate): a wrong code counts against the limits and the code's own
// failures in one commit. apply gets the code's record and returns the txn
// of the action; a named condition of it that fails is returned as is (the
// caller names the answer), an unnamed one makes it all run again.
func (s *Service) redeem(ctx context.Context, r redemption, apply func(c *emailCode) (*raftstore.Txn, error)) (*raftstore.TxnResult, *raftstore.Txn, error) {
	at := attempt{kind: kindCode, action: r.action, pid: r.pid, email: r.email, addr: r.addr}
	invalid := error(&FieldError{Field: r.field, Err: ErrInvalidCode})
	if r.token != "" {
		// A link token carries 256 random bits: only the address rule counts
		// its failures (as for verify tokens).
		at = attempt{kind: kindReset, action: r.action, pid: r.pid, addr: r.addr}
		invalid = &FieldError{Field: "token", Err: ErrInvalidCode}
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", raftstore.ErrTimeout, err)
		}
		if err := s.checkLimits(at); err != nil {
			return nil, nil, err
		}
		doc, c, err := s.presentedCode(r)
		if err != nil {
			return nil, nil, err
		}
		if c == nil {
			if err := s.recordFailure(ctx, at); err != nil {
				return nil, nil, err
			}
			return nil, nil, invalid
		}
		good := r.token != "" && EqualHash(c.LinkHash, HashToken(r.token)) ||
			r.token == "" && EqualHash(c.Hash, codeHash(c.Salt, r.pid, r.purpose, c.Email, normalizeCode(r.code)))
		if !good {
			// The wrong code counts against the limits and voids the record
			// at its fifth failure, in one transaction; a conflict judges
			// both again.
			c.Failures++
			ops := []raftstore.Op{{Kind: raftstore.OpPut, Path: doc.Path, Data: mustJSON(c)}}
			if c.Failures >= MaxEmailCodeFailures {
				ops = s.consumeOps(doc.Path, c)
			}
			txn := &raftstore.Txn{Time: s.now().UnixNano(),
				Conds: []raftstore.Cond{{Path: doc.Path, Kind: raftstore.CondRevision, Revision: doc.Revision}}, Ops: ops}
			release, err := s.holdFailGate(ctx)
			if err != nil {
				return nil, nil, err
			}
			res, err := s.commitFailure(ctx, txn, at)
			release()
			if err != nil {
				return nil, nil, err
			}
			if !res.OK() {
				if err := s.store.WaitApplied(ctx, res.Revision); err != nil {
					return nil, nil, err
				}
				continue
			}
			return nil, nil, invalid
		}
		gate, err := s.limitGate(at)
		if err != nil {
			return nil, nil, err
		}
		txn, err := apply(c)
		if errors.Is(err, errCodeVoid) {
			return nil, nil, invalid
		}
		if err != nil {
			return nil, nil, err
		}
		txn.Time = s.now().UnixNano()
		txn.Conds = append(append(txn.Conds, raftstore.Cond{Path: doc.Path, Kind: raftstore.CondRevision, Revision: doc.Revision}), gate...)
		txn.Ops = append(txn.Ops, s.consumeOps(doc.Path, c)...)
		res, err := s.store.Txn(ctx, txn)
		if err != nil {
			return nil, nil, err
		}
		if res.OK() || res.Err != raftstore.ErrCodeCondFailed || res.OpFailed || res.Failed(txn) != "" {
			return res, txn, nil
		}
		if err := s.store.WaitApplied(ctx, res.Revision); err != nil {
			return nil, nil, err
		}
	}
}

// presentedCode reads the record a redemption names, or nil when there is
// no live one (none, expired, void, or for another purpose or project).
func (s *Service) presentedCode(r redemption) (*raftstore.Document, *emailCode, error) {
	path := keys.EmailCode(r.pid, r.purpose, r.subject)
	if r.token != "" {
		var l emailLink
		ok, err := s.getJSON(keys.EmailLink(HashToken(r.token)), &l)
		if err != nil || !ok {
			return nil, nil, err
		}
		path = l.Code
	}
	doc, err := s.store.Get(path)
	if err != nil || doc == nil {
		return nil, nil, err
	}
	var c emailCode
	if err := decodeJSON(doc, &c); err != nil {
		return nil, nil, err
	}
	if c.ProjectID != r.pid || c.Purpose != r.purpose || s.now().Unix() >= c.ExpiresAt || c.Failures >= MaxEmailCodeFailures {
		return nil, nil, nil
	}
	return doc, &c, nil
}

// consumeOps delete a code and its link.
func (s *Service) consumeOps(path string, c *emailCode) []raftstore.Op {
	ops := []raftstore.Op{{Kind: raftstore.OpDelete, Path: path}}
	if c.LinkHash != "" {
		ops = append(ops, raftstore.Op{Kind: raftstore.OpDelete, Path: keys.EmailLink(c.LinkHash), IfExists: true})
	}
	return ops
}

// codeAccount reads the account a code was sent for and checks that the
// code still fits it: the account exists with the address the code went to.
func (s *Service) codeAccount(c *emailCode, wantEmail string) (*account, uint64, error) {
	acc, rev, err := s.accountRev(c.ProjectID, c.UserID)
	if err != nil {
		return nil, 0, err
	}
	if acc == nil || acc.Email != wantEmail {
		return nil, 0, errCodeVoid
	}
	return acc, rev, nil
}

// accountPut is the op that stores acc, with the condition that it is still
// at revision rev.
func accountPut(pid string, acc *account, rev uint64) (raftstore.Op, raftstore.Cond) {
	return raftstore.Op{Kind: raftstore.OpPut, Path: keys.User(pid, acc.ID), Data: mustJSON(acc)},
		raftstore.Cond{Path: keys.User(pid, acc.ID), Kind: raftstore.CondRevision, Revision: rev}
}

// VerifyEmail marks an address verified with the code sent to it (email and
// code) or the link token of that email (token).
func (s *Service) VerifyEmail(ctx context.Context, pid, email, code, token, addr string) (*User, uint64, error) {
	r := redemption{pid: pid, purpose: purposeVerify, email: email, code: code, token: token, field: "code", action: actionVerifyEmail, addr: addr}
	if token == "" {
		if err := ValidateEmail(email); err != nil {
			return nil, 0, err
		}
		r.subject = NormalizeEmail(email)
	}
	var acc *account
	res, _, err := s.redeem(ctx, r, func(c *emailCode) (*raftstore.Txn, error) {
		var rev uint64
		var err error
		if acc, rev, err = s.codeAccount(c, c.Email); err != nil {
			return nil, err
		}
		acc.EmailVerified = true
		op, cond := accountPut(pid, acc, rev)
		return &raftstore.Txn{Conds: []raftstore.Cond{cond}, Ops: []raftstore.Op{op,
			s.auditOp(pid, AuditEvent{Type: AuditEmailVerified, UserID: acc.ID, Address: addr})}}, nil
	})
	if err != nil {
		return nil, 0, err
	}
	if !res.OK() {
		return nil, 0, fmt.Errorf("verify email refused: %s", res.Err)
	}
	return &acc.User, res.Revision, nil
}

// ResetPasswordWithEmailCode sets a new password with the code sent by
// request-password-reset (email and code, or the link token) and ends
// every session of the account. It also marks the address verified: the
// code proved it. The password is hashed only once the code is proved.
func (s *Service) ResetPasswordWithEmailCode(ctx context.Context, pid, email, code, token, next, addr string) (uint64, error) {
	if err := ValidatePassword(next); err != nil {
		return 0, &FieldError{Field: "newPassword", Err: err}
	}
	r := redemption{pid: pid, purpose: purposeReset, email: email, code: code, token: token, field: "emailCode", action: actionResetEmailCode, addr: addr}
	if token == "" {
		if err := ValidateEmail(email); err != nil {
			return 0, err
		}
		r.subject = NormalizeEmail(email)
	}
	var hash, uid string
	res, _, err := s.redeem(ctx, r, func(c *emailCode) (*raftstore.Txn, error) {
		acc, rev, err := s.codeAccount(c, c.Email)
		if err != nil {
			return nil, err
		}
		if hash == "" {
			if hash, err = s.hasher.Hash(ctx, next); err != nil {
				return nil, fmt.Errorf("hash password: %w", err)
			}
		}
		uid = acc.ID
		acc.PasswordHash, acc.EmailVerified = hash, true
		acc.SessionGen++
		op, cond := accountPut(pid, acc, rev)
		return &raftstore.Txn{Conds: []raftstore.Cond{cond}, Ops: []raftstore.Op{op,
			s.auditOp(pid, AuditEvent{Type: AuditPasswordReset, UserID: acc.ID, Address: addr, Detail: map[string]string{"method": "email"}})}}, nil
	})
	if err != nil {
		return 0, err
	}
	if !res.OK() {
		return 0, fmt.Errorf("reset password refused: %s", res.Err)
	}
	s.logger.Info("password reset by email code", "project", pid, "user", uid)
	s.securityChanged(ctx, pid, uid, "password-reset")
	return res.Revision, nil
}

// LoginEmailCode signs in with the code sent by request-email-code (email
// and code, or the link token), like a login with a password: a session,
// or a login ticket when the account has an authenticator. The address
// counts as verified. An unknown address never creates an account: it
// answers invalid_code like a wrong code.
func (s *Service) LoginEmailCode(ctx context.Context, pid, email, code, token, addr string) (*LoginResult, error) {
	r := redemption{pid: pid, purpose: purposeSignIn, email: email, code: code, token: token, field: "code", action: actionLoginEmailCode, addr: addr}
	if token == "" {
		if err := ValidateEmail(email); err != nil {
			return nil, err
		}
		r.subject = NormalizeEmail(email)
	}
	var out *LoginResult
	res, txn, err := s.redeem(ctx, r, func(c *emailCode) (*raftstore.Txn, error) {
		acc, rev, err := s.codeAccount(c, c.Email)
		if err != nil {
			return nil, err
		}
		if err := acc.checkEnabled(); err != nil {
			return nil, err
		}
		acc.EmailVerified = true
		var grantOps []raftstore.Op
		if out, grantOps, err = s.signInGrant(pid, acc, clientOf(ctx, addr)); err != nil {
			return nil, err
		}
		op, cond := accountPut(pid, acc, rev)
		// A disable racing the sign-in wins at the commit (enabledCond).
		txn := &raftstore.Txn{Conds: []raftstore.Cond{cond, enabledCond(pid, acc.ID)}, Ops: append([]raftstore.Op{op}, grantOps...)}
		if !out.RequiresTOTP {
			txn.Ops = append(txn.Ops, s.auditOp(pid, AuditEvent{Type: AuditLogin, UserID: acc.ID, Address: addr, Detail: map[string]string{"method": "email-code"}}))
		}
		return txn, nil
	})
	switch {
	case err != nil:
		return nil, err
	case disabledAtCommit(res, txn):
		return nil, ErrAccountDisabled
	case !res.OK():
		return nil, fmt.Errorf("login with email code refused: %s", res.Err)
	}
	if out.User != nil {
		out.User.EmailVerified = true
	}
	out.Revision = res.Revision
	return out, nil
}

// RequestEmailChange sends a code to the caller's new address. It needs a
// recent login (held at the commit) and an address not taken now (taken
// again at the commit of ConfirmEmailChange wins there). Anonymous accounts
// link an address with link-email instead.
func (s *Service) RequestEmailChange(ctx context.Context, p *Principal, newEmail, addr string) (uint64, error) {
	if err := ValidateEmail(newEmail); err != nil {
		return 0, &FieldError{Field: "newEmail", Err: err}
	}
	newEmail = NormalizeEmail(newEmail)
	acc, err := s.account(p.ProjectID, p.UserID)
	if err != nil {
		return 0, err
	}
	if acc == nil {
		return 0, ErrInvalidToken
	}
	if acc.Email == "" {
		return 0, ErrNoEmail
	}
	if acc.Email == newEmail {
		return 0, &FieldError{Field: "newEmail", Err: fmt.Errorf("%w: newEmail is the account's address already", ErrInvalidArgument)}
	}
	at := attempt{kind: kindEmailSend, action: actionChangeEmail, pid: p.ProjectID, email: newEmail, addr: addr}
	if err := s.checkLimits(at); err != nil {
		return 0, err
	}
	res, _, err := raftstore.Guarded(ctx, s.store, func() (*raftstore.Txn, error) {
		proof, err := s.recentProof(p)
		if err != nil {
			return nil, err
		}
		acc, rev, err := s.accountRev(p.ProjectID, p.UserID)
		if err != nil {
			return nil, err
		}
		if acc == nil {
			return nil, ErrInvalidToken
		}
		taken, err := s.store.Get(keys.Email(p.ProjectID, newEmail))
		if err != nil {
			return nil, err
		}
		if taken != nil {
			return nil, &FieldError{Field: "newEmail", Err: ErrEmailTaken}
		}
		txn := &raftstore.Txn{Time: s.now().UnixNano(), Conds: []raftstore.Cond{proof,
			{Path: keys.User(p.ProjectID, acc.ID), Kind: raftstore.CondRevision, Revision: rev}}}
		if err := s.addFailure(txn, at); err != nil {
			return nil, err
		}
		ops, err := s.issueCode(p.ProjectID, acc.ID, purposeChange, newEmail, acc.Email)
		if err != nil {
			return nil, err
		}
		txn.Ops = append(txn.Ops, ops...)
		return txn, nil
	})
	if err != nil {
		return 0, err
	}
	if !res.OK() {
		return 0, fmt.Errorf("change email refused: %s", res.Err)
	}
	return res.Revision, nil
}

// ConfirmEmailChange moves the caller's account to the new address with
// the code sent to it (or its link token): the email index moves in the
// same commit, which fails with ErrEmailTaken when the address was taken
// meanwhile. The new address counts as verified.
func (s *Service) ConfirmEmailChange(ctx context.Context, p *Principal, newEmail, code, token, addr string) (*User, uint64, error) {
	if token == "" {
		if err := ValidateEmail(newEmail); err != nil {
			return nil, 0, &FieldError{Field: "newEmail", Err: err}
		}
	}
	newEmail = NormalizeEmail(newEmail)
	r := redemption{pid: p.ProjectID, purpose: purposeChange, subject: p.UserID, email: p.Email, code: code, token: token, field: "code", action: actionChangeEmail, addr: addr}
	var acc *account
	res, txn, err := s.redeem(ctx, r, func(c *emailCode) (*raftstore.Txn, error) {
		if c.UserID != p.UserID || (newEmail != "" && c.Email != newEmail) {
			return nil, errCodeVoid
		}
		var rev uint64
		var err error
		if acc, rev, err = s.accountRev(p.ProjectID, p.UserID); err != nil {
			return nil, err
		}
		if acc == nil {
			return nil, ErrInvalidToken
		}
		txn := &raftstore.Txn{Conds: []raftstore.Cond{{Path: keys.Email(p.ProjectID, c.Email), Kind: raftstore.CondNotExists, Name: "email"}}}
		if acc.Email != "" {
			old, err := s.store.Get(keys.Email(p.ProjectID, acc.Email))
			if err != nil {
				return nil, err
			}
			if old != nil {
				txn.Conds = append(txn.Conds, raftstore.Cond{Path: old.Path, Kind: raftstore.CondRevision, Revision: old.Revision})
				txn.Ops = append(txn.Ops, raftstore.Op{Kind: raftstore.OpDelete, Path: old.Path})
			}
		}
		from := acc.Email
		acc.Email, acc.EmailVerified = c.Email, true
		op, cond := accountPut(p.ProjectID, acc, rev)
		txn.Conds = append(txn.Conds, cond)
		txn.Ops = append(txn.Ops, op,
			raftstore.Op{Kind: raftstore.OpPut, Path: keys.Email(p.ProjectID, c.Email), Data: mustJSON(emailIndex{UserID: acc.ID})},
			s.auditOp(p.ProjectID, AuditEvent{Type: AuditEmailChanged, UserID: acc.ID, Address: addr, Detail: map[string]string{"from": from, "to": c.Email}}))
		return txn, nil
	})
	switch {
	case err != nil:
		return nil, 0, err
	case res.Failed(txn) == "email":
		return nil, 0, &FieldError{Field: "newEmail", Err: ErrEmailTaken}
	case !res.OK():
		return nil, 0, fmt.Errorf("change email refused: %s", res.Err)
	}
	s.forgetGuard(p.Session)
	return &acc.User, res.Revision, nil
}

// sweepEmailCodes removes the codes that can no longer be used (expired or
// void) with their links; the leader's Sweep runs it. Each delete is
// conditioned on the revision judged, so a code replaced meanwhile stays.
func (s *Service) sweepEmailCodes(ctx context.Context) (int, error) {
	removed := 0
	after := ""
	for {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		docs, next, err := s.store.List(keys.EmailCodesDir(), after, sweepBatch)
		if err != nil {
			return removed, err
		}
		txn := &raftstore.Txn{Time: s.now().UnixNano()}
		n := 0
		for _, d := range docs {
			var c emailCode
			if decodeJSON(d, &c) == nil && s.now().Unix() < c.ExpiresAt && c.Failures < MaxEmailCodeFailures {
				continue
			}
			txn.Conds = append(txn.Conds, raftstore.Cond{Path: d.Path, Kind: raftstore.CondRevision, Revision: d.Revision})
			txn.Ops = append(txn.Ops, s.consumeOps(d.Path, &c)...)
			n++
		}
		if n > 0 {
			res, err := s.store.Txn(ctx, txn)
			if err != nil {
				return removed, err
			}
			if res.OK() { // else one changed meanwhile: the next sweep looks again
				removed += n
			}
		}
		if next == "" {
			return removed, nil
		}
		after = next
	}
}
