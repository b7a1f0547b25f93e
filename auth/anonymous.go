package auth

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// AuthSettings are a project's sign-in settings (GET/PUT /api/auth/settings).
type AuthSettings struct {
	// AnonymousSignIn allows sign-in-anonymously (on unless turned off).
	AnonymousSignIn bool `json:"anonymousSignIn"`
	// EmailActionURL, when set, is the app page the links in emails open:
	// <url>?mode=<mode>&token=<link token>&project=<pid>. Without it the
	// emails carry the code only.
	EmailActionURL string `json:"emailActionUrl"`
}

// AuthSettingsPatch is a change of some of the settings (nil: unchanged).
type AuthSettingsPatch struct {
	AnonymousSignIn *bool   `json:"anonymousSignIn"`
	EmailActionURL  *string `json:"emailActionUrl"`
}

// maxActionURLLen bounds emailActionUrl (the link adds a token to it).
const maxActionURLLen = 1024

// authSettings reads project pid's settings (the defaults when none are
// stored) and the document they came from (nil: none).
func (s *Service) authSettings(pid string) (AuthSettings, *raftstore.Document, error) {
	out := AuthSettings{AnonymousSignIn: true}
	doc, err := s.store.Get(keys.AuthSettings(pid))
	if err != nil || doc == nil {
		return out, nil, err
	}
	if err := decodeJSON(doc, &out); err != nil {
		return out, nil, err
	}
	return out, doc, nil
}

// settingsCond holds a decision taken on the settings as read at the commit:
// the document at the revision read (0: still none).
func settingsCond(pid string, doc *raftstore.Document) raftstore.Cond {
	var rev uint64
	if doc != nil {
		rev = doc.Revision
	}
	return raftstore.Cond{Path: keys.AuthSettings(pid), Kind: raftstore.CondRevision, Revision: rev}
}

// GetAuthSettings returns the caller's project's settings; owners only.
func (s *Service) GetAuthSettings(p *Principal) (*AuthSettings, error) {
	if p.Role != RoleOwner {
		return nil, ErrForbidden
	}
	st, _, err := s.authSettings(p.ProjectID)
	if err != nil {
		return nil, err
	}
	return &st, nil
}

// SetAuthSettings changes the settings patch names; owners only, judged at
// the commit (the settings are reserved state: the Decider allows owners).
func (s *Service) SetAuthSettings(ctx context.Context, p *Principal, patch AuthSettingsPatch) (*AuthSettings, uint64, error) {
	if p.Role != RoleOwner {
		return nil, 0, ErrForbidden
	}
	if patch.EmailActionURL != nil {
		clean, err := validActionURL(*patch.EmailActionURL)
		if err != nil {
			return nil, 0, err
		}
		patch.EmailActionURL = &clean
	}
	var st AuthSettings
	res, err := s.commitAsGuarded(ctx, p, func() (*raftstore.Txn, error) {
		cur, doc, err := s.authSettings(p.ProjectID)
		if err != nil {
			return nil, err
		}
		st = cur
		if patch.AnonymousSignIn != nil {
			st.AnonymousSignIn = *patch.AnonymousSignIn
		}
		if patch.EmailActionURL != nil {
			st.EmailActionURL = *patch.EmailActionURL
		}
		return &raftstore.Txn{
			Conds: []raftstore.Cond{settingsCond(p.ProjectID, doc)},
			Ops:   []raftstore.Op{{Kind: raftstore.OpPut, Path: keys.AuthSettings(p.ProjectID), Data: mustJSON(st)}},
		}, nil
	})
	if err != nil {
		return nil, 0, err
	}
	return &st, res.Revision, nil
}

// validActionURL checks an emailActionUrl: "" (none), or an absolute https
// URL without credentials, query or fragment (the link adds its own query);
// plain http only for localhost, for development.
func validActionURL(raw string) (string, error) {
	bad := func(why string) (string, error) {
		return "", &FieldError{Field: "emailActionUrl", Err: fmt.Errorf("%w: emailActionUrl %s", ErrInvalidArgument, why)}
	}
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", nil
	}
	if len(raw) > maxActionURLLen {
		return bad(fmt.Sprintf("must be at most %d bytes", maxActionURLLen))
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return bad("must be an absolute URL like https://app.example.com/auth/action")
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return bad("must have no user, query or fragment")
	}
	switch h := u.Hostname(); {
	case u.Scheme == "https":
	case u.Scheme == "http" && (h == "localhost" || h == "127.0.0.1" || h == "::1"):
	default:
		return bad("must be https (http only for localhost)")
	}
	return u.String(), nil
}

// actionLink is the link of an email to the project's action page, or ""
// when the project set none.
func actionLink(base, mode, token, pid string) string {
	if base == "" || token == "" {
		return ""
	}
	return base + "?" + url.Values{"mode": {mode}, "token": {token}, "project": {pid}}.Encode()
}

// commitAsGuarded is commitAs for a read–check–commit loop: the txn build
// returns is committed for the caller p (the Decider judges p at the
// commit), again after a conflict on its conditions.
func (s *Service) commitAsGuarded(ctx context.Context, p *Principal, build func() (*raftstore.Txn, error)) (*raftstore.TxnResult, error) {
	if p == nil || p.Session == "" {
		return nil, ErrInvalidToken
	}
	res, _, err := raftstore.Guarded(ctx, s.store, func() (*raftstore.Txn, error) {
		t, err := build()
		if err != nil {
			return nil, err
		}
		t.Time, t.Caller = s.now().UnixNano(), p.Session
		return t, nil
	})
	if err != nil {
		return nil, err
	}
	if res.OK() {
		return res, nil
	}
	if err := DecidedRefusal(res.Err); err != nil {
		if res.Err == raftstore.ErrCodeUnauthenticated {
			s.forgetGuard(p.Session)
		}
		return nil, err
	}
	return nil, fmt.Errorf("%w: %s", errRefused, res.Err)
}

// SignInAnonymously creates an account without an email or password and
// its first session. It counts against the registration limits (per address
// and per project), and the project's setting is judged at the commit: a
// sign-in racing the owner turning it off is refused.
func (s *Service) SignInAnonymously(ctx context.Context, pid, addr string) (*AuthResult, error) {
	at := attempt{kind: kindRegister, action: actionAnonymous, pid: pid, addr: addr}
	if err := s.checkLimits(at); err != nil {
		return nil, err
	}
	uid, err := NewID()
	if err != nil {
		return nil, err
	}
	var token string
	var acc account
	res, txn, err := raftstore.Guarded(ctx, s.store, func() (*raftstore.Txn, error) {
		st, doc, err := s.authSettings(pid)
		if err != nil {
			return nil, err
		}
		if !st.AnonymousSignIn {
			return nil, ErrAnonymousDisabled
		}
		tok, sessOps, err := s.newSessionFor(pid, uid, 0, clientOf(ctx, addr))
		if err != nil {
			return nil, err
		}
		token = tok
		now := s.now()
		acc = account{User: User{ID: uid, Role: RoleUser, CreatedAt: timestamp(now), Anonymous: true}}
		txn := &raftstore.Txn{
			Time: now.UnixNano(),
			Conds: []raftstore.Cond{
				{Path: keys.Project(pid), Kind: raftstore.CondExists, Name: "project"},
				{Path: keys.User(pid, uid), Kind: raftstore.CondNotExists},
				settingsCond(pid, doc),
			},
			Ops: append([]raftstore.Op{{Kind: raftstore.OpPut, Path: keys.User(pid, uid), Data: mustJSON(acc)}}, sessOps...),
		}
		txn.Ops = append(txn.Ops, s.auditOp(pid, AuditEvent{Type: AuditRegister, UserID: uid, Address: addr, Detail: map[string]string{"method": "anonymous"}}))
		if err := s.addFailure(txn, at); err != nil {
			return nil, err
		}
		return txn, nil
	})
	switch {
	case err != nil:
		return nil, err
	case res.OK():
		return &AuthResult{Token: token, User: acc.User, Revision: res.Revision}, nil
	case res.Failed(txn) == "project":
		return nil, fmt.Errorf("%w: project not found", ErrInvalidAPIKey)
	default:
		return nil, fmt.Errorf("anonymous sign-in refused: %s", res.Err)
	}
}

// LinkEmail gives the caller's anonymous account an email and a password:
// the uid, and so every document of the user, stays. Every session of the
// account ends (a new one is returned), as after a password change. The
// email must be free at the commit. It counts against the registration
// limits: like register, it tells whether an email is taken.
func (s *Service) LinkEmail(ctx context.Context, p *Principal, email, password, addr string) (*AuthResult, error) {
	if err := ValidateEmail(email); err != nil {
		return nil, err
	}
	if err := ValidatePassword(password); err != nil {
		return nil, err
	}
	acc, err := s.account(p.ProjectID, p.UserID)
	if err != nil {
		return nil, err
	}
	if acc == nil {
		return nil, ErrInvalidToken
	}
	if !acc.Anonymous {
		return nil, ErrAlreadyLinked
	}
	at := attempt{kind: kindRegister, action: actionLinkEmail, pid: p.ProjectID, addr: addr}
	if err := s.checkLimits(at); err != nil {
		return nil, err
	}
	hash, err := s.hasher.Hash(ctx, password)
	if err != nil {
		return nil, fmt.Errorf("hash password: %w", err)
	}
	email = NormalizeEmail(email)
	var token string
	acc, rev, err := s.updateAccount(ctx, p.ProjectID, p.UserID, func(acc *account) ([]raftstore.Op, []raftstore.Cond, error) {
		if !acc.Anonymous {
			return nil, nil, ErrAlreadyLinked
		}
		// The session must still be valid (the account's generation).
		if _, sess, err := s.sessionDoc(p.Session); err != nil || sess.Gen != acc.SessionGen {
			return nil, nil, ErrInvalidToken
		}
		taken, err := s.store.Get(keys.Email(p.ProjectID, email))
		if err != nil {
			return nil, nil, err
		}
		if taken != nil {
			return nil, nil, ErrEmailTaken
		}
		acc.Email, acc.Anonymous, acc.PasswordHash, acc.EmailVerified = email, false, hash, false
		acc.SessionGen++
		tok, sessOps, err := s.newSessionFor(p.ProjectID, acc.ID, acc.SessionGen, clientOf(ctx, addr))
		if err != nil {
			return nil, nil, err
		}
		token = tok
		txn := &raftstore.Txn{Time: s.now().UnixNano(),
			// A registration of the email meanwhile fails this; the loop then
			// finds it taken.
			Conds: []raftstore.Cond{{Path: keys.Email(p.ProjectID, email), Kind: raftstore.CondNotExists}},
			Ops:   append([]raftstore.Op{{Kind: raftstore.OpPut, Path: keys.Email(p.ProjectID, email), Data: mustJSON(emailIndex{UserID: acc.ID})}}, sessOps...)}
		if err := s.addFailure(txn, at); err != nil {
			return nil, nil, err
		}
		txn.Ops = append(txn.Ops, s.auditOp(p.ProjectID, AuditEvent{Type: AuditAnonymousLinked, UserID: acc.ID, Address: addr, Detail: map[string]string{"method": "email"}}))
		return txn.Ops, txn.Conds, nil
	})
	if err != nil {
		return nil, err
	}
	s.forgetGuard(p.Session)
	return &AuthResult{Token: token, User: acc.User, Revision: rev}, nil
}
