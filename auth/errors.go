package auth

import (
	"errors"
	"net/mail"
	"strings"
)

// The messages of the validation errors below are written for end users: the
// HTTP layer may show them verbatim in a 400 response.
var (
	// ErrPasswordTooShort is returned by ValidatePassword for a password of
	// fewer than MinPasswordLen characters.
	ErrPasswordTooShort = errors.New("password must be at least 8 characters")

	// ErrPasswordTooLong is returned by ValidatePassword for a password of
	// more than MaxPasswordLen characters. Long passwords are refused, never
	// silently truncated.
	ErrPasswordTooLong = errors.New("password must be at most 128 characters")

	// ErrPasswordCommon is returned by ValidatePassword for a password found
	// in the list of commonly used passwords.
	ErrPasswordCommon = errors.New("password is too common")

	// ErrInvalidEmail is returned by ValidateEmail for anything that is not a
	// single bare address such as "ada@example.com".
	ErrInvalidEmail = errors.New("email is not a valid address")

	// ErrBadHash is returned by Hasher.Verify when the stored hash is not a
	// well-formed argon2id PHC string. It means corrupt state, not a wrong
	// password.
	ErrBadHash = errors.New("auth: malformed password hash")

	// ErrInvalidRules is the error every *RuleError wraps, so callers can
	// test for a rejected rules document with errors.Is.
	ErrInvalidRules = errors.New("auth: invalid access rules")

	// ErrRuleEval is wrapped by the error Allow returns when a rule
	// expression fails at evaluation time (a missing key, a type mismatch,
	// the cost limit). Access is denied in that case.
	ErrRuleEval = errors.New("auth: rule evaluation failed")

	// ErrInvalidArgument means a request field is malformed.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrMissingAPIKey means X-Project-Id or X-API-Key is absent.
	ErrMissingAPIKey = errors.New("X-Project-Id and X-API-Key are required")
	// ErrInvalidAPIKey means the API key does not belong to the project.
	ErrInvalidAPIKey = errors.New("API key is not valid for this project")
	// ErrEmailTaken means an account with that email exists in the project.
	ErrEmailTaken = errors.New("an account with this email already exists")
	// ErrInvalidCredentials means the email or the password is wrong (never which).
	ErrInvalidCredentials = errors.New("email or password is wrong")
	// ErrMissingToken means no bearer token was sent.
	ErrMissingToken = errors.New("a bearer token is required")
	// ErrInvalidToken means the bearer token is unknown, revoked or expired.
	ErrInvalidToken = errors.New("the bearer token is not valid")
	// ErrInvalidTicket means the login ticket is unknown, used, expired or
	// void after too many wrong codes.
	ErrInvalidTicket = errors.New("the login ticket is not valid; log in again")
	// ErrInvalidCode means a TOTP or recovery code is wrong, malformed or was
	// already used.
	ErrInvalidCode = errors.New("the code is not valid")
	// ErrInvalidVerifyToken means the verify token of a password reset is
	// unknown, used, expired or for another account.
	ErrInvalidVerifyToken = errors.New("the verify token is not valid")
	// ErrTOTPEnabled means the account already has a confirmed authenticator.
	ErrTOTPEnabled = errors.New("an authenticator is already enabled for this account")
	// ErrTOTPNotEnabled means the account has no confirmed authenticator.
	ErrTOTPNotEnabled = errors.New("no authenticator is enabled for this account")
	// ErrTOTPNotPending means confirm was called without a pending enrollment.
	ErrTOTPNotPending = errors.New("no authenticator enrollment is pending; call enroll first")
	// ErrForbidden means the caller's role does not allow the action.
	ErrForbidden = errors.New("only an owner may do this")
	// ErrUserNotFound means no account of the project has the given id.
	ErrUserNotFound = errors.New("no account with this id")
	// ErrOwnRole means an owner tried to change their own role, which could
	// leave a project without an owner.
	ErrOwnRole = errors.New("an owner cannot change their own role")
	// ErrProjectNotFound means no project has the given id.
	ErrProjectNotFound = errors.New("no project with this id")
	// ErrLastOwner means a change would leave the project without an owner.
	ErrLastOwner = errors.New("the project would be left without an owner")
)

// maxEmailLen is the longest address that fits in an SMTP forward-path (RFC
// 5321 §4.5.3.1.3 minus the angle brackets).
const maxEmailLen = 254

// ValidateEmail reports whether s is a single bare e-mail address: parseable
// by net/mail, without a display name, comments or surrounding space, at most
// 254 bytes, with a dot in the domain part. Normalize first with
// NormalizeEmail if the input may carry spaces or capitals.
func ValidateEmail(s string) error {
	if s == "" || len(s) > maxEmailLen {
		return ErrInvalidEmail
	}
	addr, err := mail.ParseAddress(s)
	if err != nil || addr.Name != "" || addr.Address != s {
		return ErrInvalidEmail
	}
	at := strings.LastIndexByte(s, '@')
	if at <= 0 {
		return ErrInvalidEmail
	}
	domain := s[at+1:]
	dot := strings.IndexByte(domain, '.')
	if dot <= 0 || strings.HasSuffix(domain, ".") {
		return ErrInvalidEmail
	}
	return nil
}

// NormalizeEmail returns s trimmed of surrounding white space and lowercased,
// the form in which addresses are stored and looked up. Lowercasing the local
// part is not RFC-correct in theory but is what every mail provider does in
// practice, and it stops "Ada@x.io" and "ada@x.io" becoming two accounts.
func NormalizeEmail(s string) string {
	return strings.ToLower(strings.TrimSpace(s))
}

// FieldError names the request field an error is about.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }
