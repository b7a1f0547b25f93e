package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

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

// coded is a refusal that carries its HTTP face where it is defined (auth's,
// push's and realtime's errors); it may name a field (Field) and a
// Retry-After (RetryAfterSeconds).
type coded interface {
	Status() int
	Code() string
	Message() string
}

// errorFor renders an error as status, code, message and field. Refusals
// carry their own face (coded); what is left here is the store's transport
// errors, which raftstore keeps free of HTTP.
func errorFor(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var c coded
	if errors.As(err, &c) {
		ae := &apiError{Status: c.Status(), Code: c.Code(), Message: c.Message()}
		if f, ok := c.(interface{ Field() string }); ok {
			ae.Field = f.Field()
		}
		if r, ok := c.(interface{ RetryAfterSeconds() int }); ok {
			ae.RetryAfter = r.RetryAfterSeconds()
		}
		// A field named where the error was raised wins over the default,
		// and so does its detail for a malformed argument.
		var fe *fieldError
		var afe *auth.FieldError
		switch {
		case errors.As(err, &fe):
			ae.Field = fe.field
		case errors.As(err, &afe):
			ae.Field, ae.Message = afe.Field, afe.Err.Error()
		case errors.Is(err, auth.ErrInvalidArgument):
			ae.Message = err.Error()
		}
		return ae
	}
	switch {
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
		if ok, held := s.errLog.allow(); ok {
			s.logger.Error("request failed", "request_id", requestID(r.Context()), "method", r.Method, "path", r.URL.Path, "status", ae.Status, "err", err,
				"suppressed_before", held)
		}
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
