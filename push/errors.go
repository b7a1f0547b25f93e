package push

import (
	"errors"
	"net/http"
)

// Error is a refusal with its HTTP face: the API layer renders Status, Code,
// Message and Field as the one error shape.
type Error struct {
	status int
	code   string
	msg    string
	field  string
}

func (e *Error) Error() string { return e.code + ": " + e.msg }

// Status is the HTTP status of the refusal.
func (e *Error) Status() int { return e.status }

// Code is the stable machine code.
func (e *Error) Code() string { return e.code }

// Message is the text shown to the client.
func (e *Error) Message() string { return e.msg }

// Field names the request field at fault, if any.
func (e *Error) Field() string { return e.field }

// Is lets errors.Is match refusals by code.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.code == e.code && t.field == "" && t.msg == ""
}

func fieldErr(field, msg string) *Error {
	return &Error{status: http.StatusBadRequest, code: "invalid_argument", msg: msg, field: field}
}

// Sentinel refusals; compare with errors.Is.
var (
	ErrPushDisabled = &Error{status: http.StatusForbidden, code: "push_disabled"}
	ErrForbidden    = &Error{status: http.StatusForbidden, code: "forbidden"}
	ErrNotFound     = &Error{status: http.StatusNotFound, code: "not_found"}
	ErrConflict     = &Error{status: http.StatusConflict, code: "not_cancellable"}
	ErrNoSecretKey  = &Error{status: http.StatusNotImplemented, code: "secret_key_required"}
	ErrTooMany      = &Error{status: http.StatusConflict, code: "limit_exceeded"}
)

func withMsg(base *Error, msg, field string) *Error {
	return &Error{status: base.status, code: base.code, msg: msg, field: field}
}
