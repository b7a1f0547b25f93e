package httpapi

import (
	"context"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/raftstore"
)

// authBody holds every field any /api/auth or /api/authenticator action reads.
type authBody struct {
	Action          *string `json:"action"`
	Email           string  `json:"email"`
	Password        string  `json:"password"`
	Name            string  `json:"name"`
	LoginTicket     string  `json:"loginTicket"`
	Code            *string `json:"code"`
	CurrentPassword string  `json:"currentPassword"`
	NewPassword     string  `json:"newPassword"`
	VerifyToken     string  `json:"verifyToken"`
	UserID          string  `json:"userId"`
	Role            string  `json:"role"`
	ProjectID       string  `json:"projectId"`
	// The accounts issue's actions.
	Token     string `json:"token"`     // verify-email: the link token
	EmailCode string `json:"emailCode"` // reset-password: a code sent by email
	NewEmail  string `json:"newEmail"`  // change-email
	Provider  string `json:"provider"`  // oauth-link
	Redirect  string `json:"redirect"`  // oauth-link
	SessionID string `json:"sessionId"` // revoke-session
}

// authActions are the actions of POST /api/auth.
var authActions = map[string]bool{
	"register": true, "login": true, "login-verify": true, "logout": true, "me": true,
	"change-password": true, "reset-password": true, "set-role": true, "disable-totp": true,
	"reauthenticate": true,
	// The accounts issue's actions (httpapi/authactions.go).
	"send-verification": true, "verify-email": true, "request-password-reset": true,
	"request-email-code": true, "login-email-code": true, "change-email": true, "delete-account": true,
	"sign-in-anonymously": true, "link-email": true, "oauth-exchange": true, "oauth-link": true,
	"list-sessions": true, "revoke-session": true,
}

// authTimeout bounds one authentication request, hashing queue included.
const authTimeout = 15 * time.Second

// projectKey checks X-Project-Id and X-API-Key after a strong sync, so that a
// project created through any node is known here, and so are the failures
// counted by the brute-force limits.
func (s *Server) projectKey(ctx context.Context, r *http.Request) (string, error) {
	pid, key := r.Header.Get("X-Project-Id"), r.Header.Get("X-API-Key")
	if pid == "" || key == "" {
		return "", auth.ErrMissingAPIKey
	}
	if err := s.waitRead(ctx, raftstore.Strong, 0); err != nil {
		return "", err
	}
	return pid, s.accounts.CheckAPIKey(pid, key)
}

// projectPrincipal resolves the bearer token of a request already synced by
// projectKey and checks that it belongs to project pid.
func (s *Server) projectPrincipal(ctx context.Context, r *http.Request, pid string) (*auth.Principal, error) {
	p, err := s.principal(ctx, r, raftstore.Local, 0)
	if err != nil {
		return nil, err
	}
	if p.ProjectID != pid {
		return nil, errProjectMismatch
	}
	return p, nil
}

var errProjectMismatch = newError(http.StatusForbidden, "project_mismatch", "X-Project-Id names another project than the token")

// required takes field name and value pairs and names the first empty one.
func required(fieldsAndValues ...string) error {
	for i := 0; i+1 < len(fieldsAndValues); i += 2 {
		if fieldsAndValues[i+1] == "" {
			f := fieldsAndValues[i]
			return badField(f, "invalid_argument", f+" is required")
		}
	}
	return nil
}

// code returns the code field, which must be present.
func (b *authBody) code() (string, error) {
	if b.Code == nil || *b.Code == "" {
		return "", badField("code", "invalid_argument", "code is required")
	}
	return *b.Code, nil
}

func (s *Server) handleAuth(w http.ResponseWriter, r *http.Request) {
	if err := s.authAction(w, r); err != nil {
		s.writeError(w, r, err)
	}
}

func (s *Server) authAction(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		return methodNotAllowed("POST")
	}
	// Password hashing waits for a slot; under a flood a request gives up
	// with 503 instead of queueing for as long as its client waits.
	// The User-Agent rides in ctx to the session a sign-in opens.
	ctx, cancel := context.WithTimeout(auth.WithUserAgent(r.Context(), r.UserAgent()), authTimeout)
	defer cancel()
	var body authBody
	if err := s.decodeBody(w, r, &body); err != nil {
		return err
	}
	if body.Action == nil || *body.Action == "" {
		return badField("action", "unknown_action", "action is required")
	}
	action := *body.Action
	if !authActions[action] {
		return badField("action", "unknown_action", "unknown action "+action)
	}
	pid, err := s.projectKey(ctx, r)
	if err != nil {
		return err
	}
	addr := s.clientAddr(r)
	if handled, err := s.publicAuthAction(ctx, w, r, &body, pid, addr, action); handled {
		return err
	}
	switch action {
	case "register":
		if err := required("email", body.Email, "password", body.Password); err != nil {
			return err
		}
		res, err := s.accounts.Register(ctx, pid, body.Email, body.Password, body.Name, addr)
		if err != nil {
			return err
		}
		return writeCommitted(w, http.StatusCreated, res.Revision, res)
	case "login":
		if err := required("email", body.Email, "password", body.Password); err != nil {
			return err
		}
		res, err := s.accounts.Login(ctx, pid, body.Email, body.Password, addr)
		if err != nil {
			return err
		}
		return writeCommitted(w, http.StatusOK, res.Revision, res)
	case "login-verify":
		if err := required("loginTicket", body.LoginTicket); err != nil {
			return err
		}
		code, err := body.code()
		if err != nil {
			return err
		}
		res, err := s.accounts.LoginVerify(ctx, pid, body.LoginTicket, code, addr)
		if err != nil {
			return err
		}
		return writeCommitted(w, http.StatusOK, res.Revision, res)
	case "reset-password":
		// Two ways to prove the reset: an emailCode (or the email's link
		// token), or the TOTP path's verifyToken; never both.
		if body.VerifyToken != "" && (body.EmailCode != "" || body.Token != "") {
			return badField("emailCode", "invalid_argument", "send either emailCode or verifyToken, not both")
		}
		if body.EmailCode != "" || body.Token != "" {
			return s.resetWithEmailCode(ctx, w, &body, pid, addr)
		}
		if err := required("email", body.Email, "verifyToken", body.VerifyToken, "newPassword", body.NewPassword); err != nil {
			return err
		}
		rev, err := s.accounts.ResetPassword(ctx, pid, body.Email, body.VerifyToken, body.NewPassword, addr)
		if err != nil {
			return err
		}
		return writeCommitted(w, http.StatusOK, rev, map[string]bool{"ok": true})
	}

	// The remaining actions act for the holder of a bearer token.
	p, err := s.projectPrincipal(ctx, r, pid)
	if err != nil {
		return err
	}
	if handled, err := s.bearerAuthAction(ctx, w, r, &body, p, addr, action); handled {
		return err
	}
	switch action {
	case "logout":
		rev, err := s.accounts.Logout(ctx, bearer(r))
		if err != nil {
			return err
		}
		return writeCommitted(w, http.StatusOK, rev, map[string]bool{"ok": true})
	case "me":
		u, err := s.accounts.Me(p.ProjectID, p.UserID)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"user": u})
	case "change-password":
		if err := required("currentPassword", body.CurrentPassword, "newPassword", body.NewPassword); err != nil {
			return err
		}
		res, err := s.accounts.ChangePassword(ctx, p, body.CurrentPassword, body.NewPassword, addr)
		if err != nil {
			return err
		}
		return writeCommitted(w, http.StatusOK, res.Revision, map[string]any{"ok": true, "token": res.Token, "user": res.User})
	case "set-role":
		u, rev, err := s.accounts.SetRole(ctx, p, body.UserID, body.Role)
		if err != nil {
			return err
		}
		return writeCommitted(w, http.StatusOK, rev, map[string]any{"user": u})
	case "reauthenticate":
		code := ""
		if body.Code != nil {
			code = *body.Code
		}
		rev, err := s.accounts.Reauthenticate(ctx, p, body.Password, code, addr)
		if err != nil {
			return err
		}
		return writeCommitted(w, http.StatusOK, rev, map[string]bool{"ok": true})
	case "disable-totp":
		code, err := body.code()
		if err != nil {
			return err
		}
		u, rev, err := s.accounts.DisableTOTP(ctx, p, code, addr)
		if err != nil {
			return err
		}
		return writeCommitted(w, http.StatusOK, rev, map[string]any{"totpEnabled": false, "user": u})
	}
	return nil
}

// writeCommitted writes a response to a write, with its X-Revision.
func writeCommitted(w http.ResponseWriter, status int, rev uint64, v any) error {
	if rev > 0 {
		w.Header().Set("X-Revision", itoa(rev))
	}
	writeJSON(w, status, v)
	return nil
}

// handleAuthenticator serves POST /api/authenticator/{enroll,confirm,verify}.
func (s *Server) handleAuthenticator(w http.ResponseWriter, r *http.Request) {
	if err := s.authenticatorAction(w, r); err != nil {
		s.writeError(w, r, err)
	}
}

func (s *Server) authenticatorAction(w http.ResponseWriter, r *http.Request) error {
	op := r.PathValue("op")
	switch op {
	case "enroll", "confirm", "verify":
	default:
		return newError(http.StatusNotFound, "not_found", "no such route")
	}
	if r.Method != http.MethodPost {
		return methodNotAllowed("POST")
	}
	ctx, cancel := context.WithTimeout(r.Context(), authTimeout)
	defer cancel()
	var body authBody
	// enroll has no body; one may be sent (e.g. "{}") and is then checked.
	if op != "enroll" || r.ContentLength != 0 {
		if err := s.decodeBody(w, r, &body); err != nil {
			return err
		}
	}
	pid, err := s.projectKey(ctx, r)
	if err != nil {
		return err
	}
	addr := s.clientAddr(r)
	if op == "verify" {
		if body.ProjectID != "" && body.ProjectID != pid {
			return newError(http.StatusForbidden, "project_mismatch", "projectId names another project than X-Project-Id")
		}
		if err := required("email", body.Email); err != nil {
			return err
		}
		code, err := body.code()
		if err != nil {
			return err
		}
		res, err := s.accounts.VerifyForReset(ctx, pid, body.Email, code, addr)
		if err != nil {
			return err
		}
		return writeCommitted(w, http.StatusOK, res.Revision, res)
	}
	p, err := s.projectPrincipal(ctx, r, pid)
	if err != nil {
		return err
	}
	if op == "enroll" {
		res, rev, err := s.accounts.Enroll(ctx, p)
		if err != nil {
			return err
		}
		return writeCommitted(w, http.StatusOK, rev, res)
	}
	code, err := body.code()
	if err != nil {
		return err
	}
	res, err := s.accounts.Confirm(ctx, p, code)
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusOK, res.Revision, res)
}

// clientAddr is the address the brute-force limits count against: the TCP
// peer, or, when the peer is a trusted proxy, the nearest untrusted address
// of X-Forwarded-For. IPv6 clients are counted per /64, the block one
// subscriber usually holds.
func (s *Server) clientAddr(r *http.Request) string {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	addr := ap.Addr().Unmap()
	if s.trustedProxy(addr) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
			if err != nil {
				break
			}
			addr = a.Unmap()
			if !s.trustedProxy(addr) {
				break
			}
		}
	}
	if addr.Is6() {
		if pfx, err := addr.Prefix(64); err == nil {
			return pfx.String()
		}
	}
	return addr.String()
}

func (s *Server) trustedProxy(a netip.Addr) bool {
	for _, p := range s.proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func (s *Server) handleRules(w http.ResponseWriter, r *http.Request) {
	if err := s.rulesAction(w, r); err != nil {
		s.writeError(w, r, err)
	}
}

type rulesResponse struct {
	Rules    []auth.Rule `json:"rules"`
	Revision uint64      `json:"revision,omitempty"`
}

// rulesAction serves GET and PUT /api/db/rules, for owners only.
func (s *Server) rulesAction(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet && r.Method != http.MethodPut {
		return methodNotAllowed("GET", "PUT")
	}
	ctx := r.Context()
	var rs auth.RuleSet
	if r.Method == http.MethodPut {
		if err := s.decodeBody(w, r, &rs); err != nil {
			return err
		}
		if rs.Rules == nil {
			return badField("rules", "invalid_argument", "rules is required (an array of {match, read, write})")
		}
	}
	p, err := s.principal(ctx, r, raftstore.Strong, 0)
	if err != nil {
		return err
	}
	if p.Role != auth.RoleOwner {
		return newError(http.StatusForbidden, "forbidden", "only an owner may read or change the access rules")
	}
	if r.Method == http.MethodGet {
		rules, err := s.accounts.Rules(p.ProjectID)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, rulesResponse{Rules: rules.Source().Rules})
		return nil
	}
	rev, err := s.accounts.SetRules(ctx, p, rs)
	if err != nil {
		return err
	}
	w.Header().Set("X-Revision", itoa(rev))
	writeJSON(w, http.StatusOK, rulesResponse{Rules: rs.Rules, Revision: rev})
	return nil
}
