package httpapi

import (
	"context"
	"net/http"

	"github.com/edgebase/edgebase/auth"
)

// The accounts issue's routes and /api/auth actions. Each area lives in its
// own file: mailapi.go (SMTP settings, templates), auth_email.go (email codes,
// anonymous sign-in, linking, deletion, auth settings), oauthapi.go (OAuth /
// OIDC), usersapi.go (owner administration, a user's own sessions),
// keysapi.go (API keys) and auditapi.go (the audit log).

// accountsRoutes registers the accounts issue's routes.
func (s *Server) accountsRoutes() {
	s.mux.HandleFunc("/api/auth/smtp", s.handleSMTP)
	s.mux.HandleFunc("/api/auth/email-templates", s.handleEmailTemplates)
	s.mux.HandleFunc("/api/auth/email-templates/{kind}", s.handleEmailTemplate)
	s.mux.HandleFunc("/api/auth/settings", s.handleAuthSettings)
	s.mux.HandleFunc("/api/auth/oauth", s.handleOAuthProviders)
	s.mux.HandleFunc("/api/auth/oauth/{provider}", s.handleOAuthProvider)
	s.mux.HandleFunc("/api/auth/oauth/{provider}/start", s.handleOAuthStart)
	s.mux.HandleFunc("/api/auth/oauth/{provider}/callback", s.handleOAuthCallback)
	s.mux.HandleFunc("/api/auth/users", s.handleUsers)
	s.mux.HandleFunc("/api/auth/users/{id}", s.handleUser)
	s.mux.HandleFunc("/api/auth/users/{id}/{op}", s.handleUserOp)
	s.mux.HandleFunc("/api/keys", s.handleKeys)
	s.mux.HandleFunc("/api/keys/{id}", s.handleKey)
	s.mux.HandleFunc("/api/auth/audit", s.handleAudit)
}

// projectCaller resolves a request's project key (after a strong sync, see
// projectKey) and its bearer token, which must belong to that project. The
// service judges what the caller may do (owner routes: ownerCall).
func (s *Server) projectCaller(ctx context.Context, r *http.Request) (*auth.Principal, error) {
	pid, err := s.projectKey(ctx, r)
	if err != nil {
		return nil, err
	}
	return s.projectPrincipal(ctx, r, pid)
}

// publicAuthAction serves the accounts issue's /api/auth actions that need
// no bearer token (the project key is checked); handled is false for any
// other action.
func (s *Server) publicAuthAction(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, pid, addr, action string) (handled bool, err error) {
	switch action {
	case "verify-email":
		return true, s.actVerifyEmail(ctx, w, r, b, pid, addr)
	case "request-password-reset":
		return true, s.actRequestPasswordReset(ctx, w, r, b, pid, addr)
	case "request-email-code":
		return true, s.actRequestEmailCode(ctx, w, r, b, pid, addr)
	case "login-email-code":
		return true, s.actLoginEmailCode(ctx, w, r, b, pid, addr)
	case "sign-in-anonymously":
		return true, s.actSignInAnonymously(ctx, w, r, b, pid, addr)
	case "oauth-exchange":
		return true, s.actOAuthExchange(ctx, w, r, b, pid, addr)
	}
	return false, nil
}

// bearerAuthAction serves the accounts issue's /api/auth actions that act
// for the holder of a bearer token of project p.ProjectID.
func (s *Server) bearerAuthAction(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, p *auth.Principal, addr, action string) (handled bool, err error) {
	switch action {
	case "send-verification":
		return true, s.actSendVerification(ctx, w, r, b, p, addr)
	case "change-email":
		return true, s.actChangeEmail(ctx, w, r, b, p, addr)
	case "delete-account":
		return true, s.actDeleteAccount(ctx, w, r, b, p, addr)
	case "link-email":
		return true, s.actLinkEmail(ctx, w, r, b, p, addr)
	case "oauth-link":
		return true, s.actOAuthLink(ctx, w, r, b, p, addr)
	case "list-sessions":
		return true, s.actListSessions(ctx, w, r, b, p, addr)
	case "revoke-session":
		return true, s.actRevokeSession(ctx, w, r, b, p, addr)
	}
	return false, nil
}
