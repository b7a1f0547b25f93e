package httpapi

import (
	"context"
	"net/http"

	"github.com/edgebase/edgebase/auth"
)

// The /api/auth actions of email codes, anonymous sign-in, linking and
// account deletion, and GET/PUT /api/auth/settings. A code action takes
// either the code with its address or the link token of the email
// ({"token"}), never both.

// codeOrToken checks that a request names a code (field codeField, with
// email unless emailField is "") or a link token, not both, and returns the
// code.
func codeOrToken(b *authBody, code, codeField, emailField, email string) (string, error) {
	if b.Token != "" {
		if code != "" {
			return "", badField(codeField, "invalid_argument", "send either "+codeField+" or token, not both")
		}
		return "", nil
	}
	if emailField != "" {
		if err := required(emailField, email); err != nil {
			return "", err
		}
	}
	if err := required(codeField, code); err != nil {
		return "", err
	}
	return code, nil
}

// codeField is the code field of a request ("" when absent).
func (b *authBody) codeValue() string {
	if b.Code == nil {
		return ""
	}
	return *b.Code
}

func (s *Server) actVerifyEmail(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, pid, addr string) error {
	code, err := codeOrToken(b, b.codeValue(), "code", "email", b.Email)
	if err != nil {
		return err
	}
	u, rev, err := s.accounts.VerifyEmail(ctx, pid, b.Email, code, b.Token, addr)
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusOK, rev, map[string]any{"user": u})
}

// okAnswer is the answer of a request that sends a code: the same whether
// or not the address has an account.
var okAnswer = map[string]bool{"ok": true}

func (s *Server) actRequestPasswordReset(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, pid, addr string) error {
	if err := required("email", b.Email); err != nil {
		return err
	}
	rev, err := s.accounts.RequestPasswordReset(ctx, pid, b.Email, addr)
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusOK, rev, okAnswer)
}

func (s *Server) actRequestEmailCode(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, pid, addr string) error {
	if err := required("email", b.Email); err != nil {
		return err
	}
	rev, err := s.accounts.RequestEmailCode(ctx, pid, b.Email, addr)
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusOK, rev, okAnswer)
}

func (s *Server) actLoginEmailCode(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, pid, addr string) error {
	code, err := codeOrToken(b, b.codeValue(), "code", "email", b.Email)
	if err != nil {
		return err
	}
	res, err := s.accounts.LoginEmailCode(ctx, pid, b.Email, code, b.Token, addr)
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusOK, res.Revision, res)
}

// resetWithEmailCode serves reset-password with an emailCode (or a link
// token) in place of the TOTP path's verifyToken.
func (s *Server) resetWithEmailCode(ctx context.Context, w http.ResponseWriter, b *authBody, pid, addr string) error {
	code, err := codeOrToken(b, b.EmailCode, "emailCode", "email", b.Email)
	if err != nil {
		return err
	}
	if err := required("newPassword", b.NewPassword); err != nil {
		return err
	}
	rev, err := s.accounts.ResetPasswordWithEmailCode(ctx, pid, b.Email, code, b.Token, b.NewPassword, addr)
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusOK, rev, okAnswer)
}

func (s *Server) actSignInAnonymously(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, pid, addr string) error {
	res, err := s.accounts.SignInAnonymously(ctx, pid, addr)
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusCreated, res.Revision, res)
}

func (s *Server) actSendVerification(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, p *auth.Principal, addr string) error {
	already, rev, err := s.accounts.SendVerification(ctx, p, addr)
	if err != nil {
		return err
	}
	if already {
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true, "alreadyVerified": true})
		return nil
	}
	return writeCommitted(w, http.StatusOK, rev, okAnswer)
}

// actChangeEmail is both steps of change-email: {newEmail} sends a code to
// the new address; {newEmail, code} (or {token}) moves the account to it.
func (s *Server) actChangeEmail(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, p *auth.Principal, addr string) error {
	if b.Code == nil && b.Token == "" {
		if err := required("newEmail", b.NewEmail); err != nil {
			return err
		}
		rev, err := s.accounts.RequestEmailChange(ctx, p, b.NewEmail, addr)
		if err != nil {
			return err
		}
		return writeCommitted(w, http.StatusOK, rev, map[string]bool{"ok": true, "codeSent": true})
	}
	code, err := codeOrToken(b, b.codeValue(), "code", "newEmail", b.NewEmail)
	if err != nil {
		return err
	}
	u, rev, err := s.accounts.ConfirmEmailChange(ctx, p, b.NewEmail, code, b.Token, addr)
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusOK, rev, map[string]any{"user": u})
}

func (s *Server) actDeleteAccount(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, p *auth.Principal, addr string) error {
	rev, err := s.accounts.DeleteSelf(ctx, p)
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusOK, rev, map[string]bool{"ok": true, "deleted": true})
}

func (s *Server) actLinkEmail(ctx context.Context, w http.ResponseWriter, r *http.Request, b *authBody, p *auth.Principal, addr string) error {
	if err := required("email", b.Email, "password", b.Password); err != nil {
		return err
	}
	res, err := s.accounts.LinkEmail(ctx, p, b.Email, b.Password, addr)
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusOK, res.Revision, res)
}

// handleAuthSettings serves GET and PUT /api/auth/settings, for owners.
func (s *Server) handleAuthSettings(w http.ResponseWriter, r *http.Request) {
	if err := s.authSettings(w, r); err != nil {
		s.writeError(w, r, err)
	}
}

func (s *Server) authSettings(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet && r.Method != http.MethodPut {
		return methodNotAllowed("GET", "PUT")
	}
	ctx, cancel := context.WithTimeout(r.Context(), authTimeout)
	defer cancel()
	var patch auth.AuthSettingsPatch
	if r.Method == http.MethodPut {
		if err := s.decodeBody(w, r, &patch); err != nil {
			return err
		}
	}
	p, err := s.projectCaller(ctx, r)
	if err != nil {
		return err
	}
	if r.Method == http.MethodGet {
		st, err := s.accounts.GetAuthSettings(p)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, st)
		return nil
	}
	st, rev, err := s.accounts.SetAuthSettings(ctx, p, patch)
	if err != nil {
		return err
	}
	return writeCommitted(w, http.StatusOK, rev, st)
}
