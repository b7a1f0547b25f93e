package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/raftstore"
)

// OAuth / OpenID Connect sign-in (auth/oauth.go):
//
//	GET    /api/auth/oauth                          the project's providers (project key)
//	GET|PUT|DELETE /api/auth/oauth/{provider}       a provider's configuration (owner)
//	GET    /api/auth/oauth/{provider}/start         browser: 302 to the provider
//	GET|POST /api/auth/oauth/{provider}/callback    browser: 302 back to the app
//	POST   /api/auth {"action":"oauth-exchange"}    the app trades the one-time code
//	POST   /api/auth {"action":"oauth-link"}        a signed-in user links a provider
//
// start and callback are navigations of a browser, which sends no headers
// of ours: they answer redirects, and JSON errors only when no redirect can
// be trusted (an unknown project, provider or redirect; a bad state).

// maxCallbackForm bounds the form a provider posts to the callback (Apple's
// response_mode=form_post: state, code, id_token and the user's name).
const maxCallbackForm = 64 << 10

func (s *Server) handleOAuthProviders(w http.ResponseWriter, r *http.Request) {
	if err := s.oauthProviders(w, r); err != nil {
		s.writeError(w, r, err)
	}
}

func (s *Server) oauthProviders(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return methodNotAllowed("GET")
	}
	pid, err := s.projectKey(r.Context(), r)
	if err != nil {
		return err
	}
	list, err := s.accounts.OAuthProviders(pid)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"providers": list})
	return nil
}

func (s *Server) handleOAuthProvider(w http.ResponseWriter, r *http.Request) {
	if err := s.oauthProvider(w, r); err != nil {
		s.writeError(w, r, err)
	}
}

func (s *Server) oauthProvider(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet && r.Method != http.MethodPut && r.Method != http.MethodDelete {
		return methodNotAllowed("GET", "PUT", "DELETE")
	}
	// PUT fetches the issuer's discovery document: bound it like a login.
	ctx, cancel := context.WithTimeout(r.Context(), authTimeout)
	defer cancel()
	var in auth.OAuthProviderInput
	if r.Method == http.MethodPut {
		if err := s.decodeBody(w, r, &in); err != nil {
			return err
		}
	}
	p, err := s.projectCaller(ctx, r)
	if err != nil {
		return err
	}
	provider := r.PathValue("provider")
	switch r.Method {
	case http.MethodGet:
		info, err := s.accounts.OAuthProvider(p, provider)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, info)
		return nil
	case http.MethodDelete:
		rev, err := s.accounts.DeleteOAuthProvider(ctx, p, provider)
		if err != nil {
			return err
		}
		return writeCommitted(w, http.StatusOK, rev, map[string]bool{"ok": true})
	}
	if in.RedirectURLs == nil {
		return badField("redirectUrls", "invalid_argument", "redirectUrls is required (the app URLs a sign-in may return to)")
	}
	info, rev, err := s.accounts.SetOAuthProvider(ctx, p, provider, in)
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusOK, rev, info)
}

func (s *Server) handleOAuthStart(w http.ResponseWriter, r *http.Request) {
	if err := s.oauthStart(w, r); err != nil {
		s.writeError(w, r, err)
	}
}

func (s *Server) oauthStart(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return methodNotAllowed("GET")
	}
	ctx, cancel := context.WithTimeout(r.Context(), authTimeout)
	defer cancel()
	q := r.URL.Query()
	pid, redirect := q.Get("projectId"), q.Get("redirect")
	if err := required("projectId", pid, "redirect", redirect); err != nil {
		return err
	}
	// A provider configured through another node is known here.
	if err := s.waitRead(ctx, raftstore.Strong, 0); err != nil {
		return err
	}
	to, err := s.accounts.OAuthStart(ctx, pid, r.PathValue("provider"), redirect)
	if err != nil {
		return err
	}
	redirectTo(w, to)
	return nil
}

func (s *Server) handleOAuthCallback(w http.ResponseWriter, r *http.Request) {
	if err := s.oauthCallback(w, r); err != nil {
		s.writeError(w, r, err)
	}
}

func (s *Server) oauthCallback(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		return methodNotAllowed("GET", "POST")
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*authTimeout)
	defer cancel()
	if r.Method == http.MethodPost {
		// Apple's response_mode=form_post.
		if ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); strings.TrimSpace(ct) != "application/x-www-form-urlencoded" {
			return newError(http.StatusUnsupportedMediaType, "unsupported_media_type", "the callback takes a form (application/x-www-form-urlencoded)")
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxCallbackForm)
		if err := r.ParseForm(); err != nil {
			return newError(http.StatusBadRequest, "invalid_argument", "the callback's form could not be read")
		}
	}
	in := auth.OAuthCallbackParams{State: r.FormValue("state"), Code: r.FormValue("code"),
		Error: r.FormValue("error"), ErrorDescription: r.FormValue("error_description"), Addr: s.clientAddr(r)}
	// The state was committed through whichever node served start.
	if err := s.waitRead(ctx, raftstore.Strong, 0); err != nil {
		return err
	}
	to, err := s.accounts.OAuthCallback(ctx, r.PathValue("provider"), in)
	if err != nil {
		return err
	}
	redirectTo(w, to)
	return nil
}

// redirectTo sends the browser on with 302. The URLs carry a state or a
// one-time code: nothing caches them and no referrer repeats them.
func redirectTo(w http.ResponseWriter, to string) {
	w.Header().Set("Location", to)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(http.StatusFound)
}

func (s *Server) actOAuthExchange(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, pid, addr string) error {
	code, err := b.code()
	if err != nil {
		return err
	}
	res, err := s.accounts.OAuthExchange(ctx, pid, code, addr)
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusOK, res.Revision, res)
}

func (s *Server) actOAuthLink(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, p *auth.Principal, addr string) error {
	if err := required("provider", b.Provider, "redirect", b.Redirect); err != nil {
		return err
	}
	u, err := s.accounts.OAuthLink(ctx, p, b.Provider, b.Redirect)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"url": u})
	return nil
}
