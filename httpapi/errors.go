package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/edgebase/edgebase/auth"
	"github.com/edgebase/edgebase/raftstore"
)

// apiError is an error with its HTTP face. Handlers return these for request
// problems; everything else is mapped by errorFor.
type apiError struct {
	Status     int
	Code       string
	Message    string
	Field      string
	RetryAfter int    // seconds; set for 429 and 503
	Allow      string // methods, for 405
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func newError(status int, code, msg string) *apiError {
	return &apiError{Status: status, Code: code, Message: msg}
}

func badField(field, code, msg string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: code, Message: msg, Field: field}
}

// fieldError attaches the request field an error is about.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.field + ": " + e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

func inField(field string, err error) error {
	if err == nil {
		return nil
	}
	return &fieldError{field: field, err: err}
}

// errorFor is the one mapping from errors to status, code and message.
func errorFor(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	// Other packages' refusals that carry their HTTP face (realtime's).
	var coded interface {
		Status() int
		Code() string
		Message() string
	}
	if errors.As(err, &coded) {
		ae := &apiError{Status: coded.Status(), Code: coded.Code(), Message: coded.Message()}
		if f, ok := coded.(interface{ Field() string }); ok {
			ae.Field = f.Field()
		}
		return ae
	}
	field := ""
	var fe *fieldError
	var afe *auth.FieldError
	if errors.As(err, &fe) {
		field = fe.field
	} else if errors.As(err, &afe) {
		field = afe.Field
	}
	for _, weak := range []error{auth.ErrPasswordTooShort, auth.ErrPasswordTooLong, auth.ErrPasswordCommon} {
		if errors.Is(err, weak) {
			return &apiError{Status: http.StatusBadRequest, Code: "invalid_argument", Message: weak.Error(), Field: orDefault(field, "password")}
		}
	}
	var re *auth.RuleError
	var rl *auth.RateLimitError
	switch {
	case errors.As(err, &rl):
		secs := int((rl.RetryAfter + time.Second - 1) / time.Second)
		return &apiError{Status: http.StatusTooManyRequests, Code: "rate_limited", Message: auth.ErrRateLimited.Error(), RetryAfter: max(secs, 1)}
	case errors.As(err, &re):
		return &apiError{Status: http.StatusBadRequest, Code: "invalid_argument", Message: re.Error(), Field: fmt.Sprintf("rules[%d].%s", re.Index, re.Field)}
	case errors.Is(err, auth.ErrInvalidEmail):
		return &apiError{Status: http.StatusBadRequest, Code: "invalid_argument", Message: auth.ErrInvalidEmail.Error(), Field: orDefault(field, "email")}
	case errors.Is(err, auth.ErrInvalidArgument):
		msg := err.Error()
		if afe != nil {
			msg = afe.Err.Error()
		}
		return &apiError{Status: http.StatusBadRequest, Code: "invalid_argument", Message: msg, Field: field}
	case errors.Is(err, auth.ErrMissingAPIKey):
		return newError(http.StatusUnauthorized, "missing_api_key", auth.ErrMissingAPIKey.Error())
	case errors.Is(err, auth.ErrInvalidAPIKey):
		return newError(http.StatusUnauthorized, "invalid_api_key", auth.ErrInvalidAPIKey.Error())
	case errors.Is(err, auth.ErrMissingToken):
		return newError(http.StatusUnauthorized, "missing_token", auth.ErrMissingToken.Error())
	case errors.Is(err, auth.ErrInvalidToken):
		return newError(http.StatusUnauthorized, "invalid_token", auth.ErrInvalidToken.Error())
	case errors.Is(err, auth.ErrInvalidCredentials):
		return &apiError{Status: http.StatusUnauthorized, Code: "invalid_credentials", Message: auth.ErrInvalidCredentials.Error(), Field: field}
	case errors.Is(err, auth.ErrInvalidTicket):
		return &apiError{Status: http.StatusUnauthorized, Code: "invalid_ticket", Message: auth.ErrInvalidTicket.Error(), Field: "loginTicket"}
	case errors.Is(err, auth.ErrInvalidCode):
		return &apiError{Status: http.StatusBadRequest, Code: "invalid_code", Message: auth.ErrInvalidCode.Error(), Field: "code"}
	case errors.Is(err, auth.ErrInvalidVerifyToken):
		return &apiError{Status: http.StatusUnauthorized, Code: "invalid_verify_token", Message: auth.ErrInvalidVerifyToken.Error(), Field: "verifyToken"}
	case errors.Is(err, auth.ErrTOTPEnabled):
		return newError(http.StatusConflict, "totp_already_enabled", auth.ErrTOTPEnabled.Error())
	case errors.Is(err, auth.ErrTOTPNotEnabled):
		return newError(http.StatusConflict, "totp_not_enabled", auth.ErrTOTPNotEnabled.Error())
	case errors.Is(err, auth.ErrTOTPNotPending):
		return newError(http.StatusConflict, "totp_not_enrolled", auth.ErrTOTPNotPending.Error())
	case errors.Is(err, auth.ErrForbidden):
		return newError(http.StatusForbidden, "forbidden", auth.ErrForbidden.Error())
	case errors.Is(err, auth.ErrUserNotFound):
		return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: auth.ErrUserNotFound.Error(), Field: orDefault(field, "userId")}
	case errors.Is(err, auth.ErrOwnRole):
		return &apiError{Status: http.StatusConflict, Code: "own_role", Message: auth.ErrOwnRole.Error(), Field: orDefault(field, "userId")}
	case errors.Is(err, auth.ErrProjectNotFound):
		return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: auth.ErrProjectNotFound.Error(), Field: orDefault(field, "id")}
	case errors.Is(err, auth.ErrLastOwner):
		return &apiError{Status: http.StatusConflict, Code: "last_owner", Message: auth.ErrLastOwner.Error(), Field: orDefault(field, "userId")}
	case errors.Is(err, auth.ErrNoSecretKey):
		return newError(http.StatusNotImplemented, "totp_not_configured", "this cluster has no secret key, so the authenticator is off; the operator must set --secret-key-file or EDGEBASE_SECRET_KEY")
	case errors.Is(err, auth.ErrEmailTaken):
		return &apiError{Status: http.StatusConflict, Code: "email_taken", Message: auth.ErrEmailTaken.Error(), Field: "email"}
	case errors.Is(err, raftstore.ErrEntryTooLarge):
		return newError(http.StatusRequestEntityTooLarge, "body_too_large", "the request is too large")
	case errors.Is(err, raftstore.ErrLastVoter):
		return newError(http.StatusConflict, "last_voter", raftstore.ErrLastVoter.Error())
	case errors.Is(err, raftstore.ErrRemoved):
		// Not retryable here: clients must go to another node.
		return newError(http.StatusServiceUnavailable, "node_removed", err.Error())
	case errors.Is(err, raftstore.ErrNoLeader), errors.Is(err, raftstore.ErrClosed):
		return &apiError{Status: http.StatusServiceUnavailable, Code: "no_leader", Message: "the cluster has no leader right now; retry", RetryAfter: 1}
	case errors.Is(err, raftstore.ErrUnknownOutcome):
		return &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the write may or may not have been applied; read before retrying", RetryAfter: 1}
	case errors.Is(err, raftstore.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the request could not be completed in time; retry", RetryAfter: 1}
	}
	return &apiError{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error"}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// writeError renders err in the one error shape. A 5xx never shows internals:
// the cause is logged with the request id instead.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	ae := errorFor(err)
	if ae.Status >= 500 {
		s.logger.Error("request failed", "request_id", requestID(r.Context()), "method", r.Method, "path", r.URL.Path, "status", ae.Status, "err", err)
	}
	if ae.Allow != "" {
		w.Header().Set("Allow", ae.Allow)
	}
	if ae.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(ae.RetryAfter))
	}
	writeJSON(w, ae.Status, errorBody{Error: errorDetail{Code: ae.Code, Message: ae.Message, Field: ae.Field}})
}

// writeJSON writes v without HTML escaping, so documents come back byte for
// byte as they were stored.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		slog.Default().Error("encode response", "err", err)
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":{"code":"internal","message":"internal error"}}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
