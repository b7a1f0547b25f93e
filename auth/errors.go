package auth

import (
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"slices"
	"strings"
	"time"
	"unicode"

	"golang.org/x/net/idna"
	"golang.org/x/text/secure/precis"
	"golang.org/x/text/unicode/norm"

	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// Error is a refusal of the auth service with its HTTP face: status, stable
// code, message and (for most) the request field at fault. The API layer
// renders it as is; there is no second table of codes. Compare with
// errors.Is against the sentinels below.
type Error struct {
	status int
	code   string
	msg    string
	field  string
}

func (e *Error) Error() string { return e.msg }

// Status is the HTTP status of the refusal.
func (e *Error) Status() int { return e.status }

// Code is the stable machine code.
func (e *Error) Code() string { return e.code }

// Message is the text shown to the client, written for end users.
func (e *Error) Message() string { return e.msg }

// Field names the request field at fault by default ("" for none); a
// FieldError around the error names another.
func (e *Error) Field() string { return e.field }

func refusal(status int, code, field, msg string) *Error {
	return &Error{status: status, code: code, msg: msg, field: field}
}

// The messages of the refusals below are written for end users: the HTTP
// layer shows them verbatim.
var (
	// ErrPasswordTooShort is returned by ValidatePassword for a password of
	// fewer than MinPasswordLen characters.
	ErrPasswordTooShort = refusal(http.StatusBadRequest, "invalid_argument", "password", "password must be at least 8 characters")

	// ErrPasswordTooLong is returned by ValidatePassword for a password of
	// more than MaxPasswordLen characters. Long passwords are refused, never
	// silently truncated.
	ErrPasswordTooLong = refusal(http.StatusBadRequest, "invalid_argument", "password", "password must be at most 128 characters")

	// ErrPasswordCommon is returned by ValidatePassword for a password found
	// in the list of commonly used passwords.
	ErrPasswordCommon = refusal(http.StatusBadRequest, "invalid_argument", "password", "password is too common")

	// ErrInvalidEmail is returned by ValidateEmail for anything that is not a
	// single bare address such as "ada@example.com".
	ErrInvalidEmail = refusal(http.StatusBadRequest, "invalid_argument", "email", "email is not a valid address")

	// ErrBadHash is returned by Hasher.Verify when the stored hash is not a
	// well-formed argon2id PHC string. It means corrupt state, not a wrong
	// password (an internal error).
	ErrBadHash = errors.New("auth: malformed password hash")

	// ErrInvalidRules is the error every *RuleError wraps, so callers can
	// test for a rejected rules document with errors.Is.
	ErrInvalidRules = errors.New("auth: invalid access rules")

	// ErrRuleEval is wrapped by the error Allow returns when a rule
	// expression fails at evaluation time (a missing key, a type mismatch,
	// the cost limit). Access is denied in that case.
	ErrRuleEval = errors.New("auth: rule evaluation failed")

	// ErrInvalidArgument means a request field is malformed; it is wrapped
	// with the detail (fmt.Errorf("%w: ...")), which the client is shown.
	ErrInvalidArgument = refusal(http.StatusBadRequest, "invalid_argument", "", "invalid argument")
	// ErrMissingAPIKey means X-Project-Id or X-API-Key is absent.
	ErrMissingAPIKey = refusal(http.StatusUnauthorized, "missing_api_key", "", "X-Project-Id and X-API-Key are required")
	// ErrInvalidAPIKey means the API key does not belong to the project.
	ErrInvalidAPIKey = refusal(http.StatusUnauthorized, "invalid_api_key", "", "API key is not valid for this project")
	// ErrEmailTaken means an account with that email exists in the project.
	ErrEmailTaken = refusal(http.StatusConflict, "email_taken", "email", "an account with this email already exists")
	// ErrInvalidCredentials means the email or the password is wrong (never which).
	ErrInvalidCredentials = refusal(http.StatusUnauthorized, "invalid_credentials", "", "email or password is wrong")
	// ErrMissingToken means no bearer token was sent.
	ErrMissingToken = refusal(http.StatusUnauthorized, "missing_token", "", "a bearer token is required")
	// ErrInvalidToken means the bearer token is unknown, revoked or expired.
	ErrInvalidToken = refusal(http.StatusUnauthorized, "invalid_token", "", "the bearer token is not valid")
	// ErrInvalidTicket means the login ticket is unknown, used, expired or
	// void after too many wrong codes.
	ErrInvalidTicket = refusal(http.StatusUnauthorized, "invalid_ticket", "loginTicket", "the login ticket is not valid; log in again")
	// ErrInvalidCode means a TOTP or recovery code is wrong, malformed or was
	// already used.
	ErrInvalidCode = refusal(http.StatusBadRequest, "invalid_code", "code", "the code is not valid")
	// ErrInvalidVerifyToken means the verify token of a password reset is
	// unknown, used, expired or for another account.
	ErrInvalidVerifyToken = refusal(http.StatusUnauthorized, "invalid_verify_token", "verifyToken", "the verify token is not valid")
	// ErrTOTPEnabled means the account already has a confirmed authenticator.
	ErrTOTPEnabled = refusal(http.StatusConflict, "totp_already_enabled", "", "an authenticator is already enabled for this account")
	// ErrTOTPNotEnabled means the account has no confirmed authenticator.
	ErrTOTPNotEnabled = refusal(http.StatusConflict, "totp_not_enabled", "", "no authenticator is enabled for this account")
	// ErrTOTPNotPending means confirm was called without a pending enrollment.
	ErrTOTPNotPending = refusal(http.StatusConflict, "totp_not_enrolled", "", "no authenticator enrollment is pending; call enroll first")
	// ErrForbidden means the caller's role does not allow the action.
	ErrForbidden = refusal(http.StatusForbidden, "forbidden", "", "only an owner may do this")
	// ErrUserNotFound means no account of the project has the given id.
	ErrUserNotFound = refusal(http.StatusNotFound, "not_found", "userId", "no account with this id")
	// ErrOwnRole means an owner tried to change their own role, which could
	// leave a project without an owner.
	ErrOwnRole = refusal(http.StatusConflict, "own_role", "userId", "an owner cannot change their own role")
	// ErrReauthRequired means the caller's session has not proved the
	// password recently enough for the change it asks for (the second
	// factor): prove it again with the reauthenticate action.
	ErrReauthRequired = refusal(http.StatusUnauthorized, "reauthentication_required", "", "this change needs a recent proof of your password: send {\"action\":\"reauthenticate\",\"password\"} (and \"code\" when the authenticator is on) first")
	// ErrProjectNotFound means no project has the given id.
	ErrProjectNotFound = refusal(http.StatusNotFound, "not_found", "id", "no project with this id")
	// ErrLastOwner means a change would leave the project without an owner.
	ErrLastOwner = refusal(http.StatusConflict, "last_owner", "userId", "the project would be left without an owner")
	// ErrNoSecretKey means the node was started without a secret key, so it
	// cannot seal or open TOTP secrets: the authenticator is off. The same
	// code is push's answer for FCM credentials, which need the key too.
	ErrNoSecretKey = refusal(http.StatusNotImplemented, "secret_key_required", "", "this cluster has no secret key, so the authenticator is off; the operator must set --secret-key-file or EDGEBASE_SECRET_KEY")

	// ---- accounts: email codes, anonymous users, deletion (H2) ----

	// ErrAnonymousDisabled means the project's owner turned anonymous
	// sign-in off.
	ErrAnonymousDisabled = refusal(http.StatusForbidden, "anonymous_disabled", "", "anonymous sign-in is turned off for this project")
	// ErrAlreadyLinked means link-email was called by an account that is not
	// anonymous: it has an email already.
	ErrAlreadyLinked = refusal(http.StatusConflict, "already_linked", "", "this account already has an email address")
	// ErrNoEmail means the action needs the account's email address and the
	// account (an anonymous one) has none: link one first.
	ErrNoEmail = refusal(http.StatusConflict, "no_email", "", "this account has no email address; link one first")

	// ---- accounts: users, sessions, API keys (H4) ----

	// ErrAccountDisabled means an owner disabled the account: it cannot sign
	// in (login, login-verify, email codes, OAuth) until enabled again.
	ErrAccountDisabled = refusal(http.StatusForbidden, "account_disabled", "", "this account is disabled")
	// ErrOwnAccount means an owner tried to disable or delete their own
	// account from the administration routes (delete-account is the way to
	// leave; disabling oneself would lock the owner out).
	ErrOwnAccount = refusal(http.StatusConflict, "own_account", "id", "an owner cannot disable or delete their own account here")
	// ErrSessionNotFound means the caller has no session with that id.
	ErrSessionNotFound = refusal(http.StatusNotFound, "not_found", "sessionId", "no session of yours has this id")
	// ErrInvalidCursor means a paging cursor is not one this API returned.
	ErrInvalidCursor = refusal(http.StatusBadRequest, "invalid_argument", "cursor", "cursor is not valid")
	// ErrKeyNotFound means the project has no API key with that id.
	ErrKeyNotFound = refusal(http.StatusNotFound, "not_found", "id", "no API key with this id")
	// ErrLastKey means deleting the key would leave the project without one.
	ErrLastKey = refusal(http.StatusConflict, "last_key", "id", "the project's last API key cannot be deleted; create another first")
	// ErrTooManyKeys means the project holds MaxAPIKeys keys already.
	ErrTooManyKeys = refusal(http.StatusConflict, "too_many_keys", "", "the project has the most API keys allowed; delete one first")
	// ---- accounts: OAuth / OIDC (H3) ----

	// ErrOAuthProviderNotFound means the project has no provider of that name.
	ErrOAuthProviderNotFound = refusal(http.StatusNotFound, "not_found", "provider", "this project has no such OAuth provider")
	// ErrRedirectNotAllowed means the app URL a sign-in should return to is
	// not one of the provider's redirectUrls.
	ErrRedirectNotAllowed = refusal(http.StatusBadRequest, "invalid_argument", "redirect", "redirect is not one of the provider's redirectUrls")
	// ErrInvalidState means an OAuth callback's state is unknown, used,
	// expired or of another provider: nothing can be trusted of the request.
	ErrInvalidState = refusal(http.StatusBadRequest, "invalid_state", "state", "the sign-in state is unknown, used or expired; start the sign-in again")
	// ErrAccountExistsUnverified means an account has the email a provider
	// gave without vouching for it: it is never linked on that word.
	ErrAccountExistsUnverified = refusal(http.StatusConflict, "account_exists_unverified", "", "an account with this email exists and the provider did not verify the address; sign in to that account and link the provider from it")
	// ErrIdentityLinked means the provider's account is linked to another
	// account of the project.
	ErrIdentityLinked = refusal(http.StatusConflict, "identity_linked", "", "this provider account is linked to another account")
	// ErrNoPublicURL means the cluster does not know the URL browsers reach
	// it at, so it cannot name its OAuth callback.
	ErrNoPublicURL = refusal(http.StatusNotImplemented, "public_url_required", "", "the cluster has no public URL; the operator must set --public-url")

	// ---- accounts: email settings and templates (H1) ----

	// ErrSMTPNotSet means the project set no SMTP server of its own: its
	// email goes through the cluster's default (--smtp-*), if any.
	ErrSMTPNotSet = refusal(http.StatusNotFound, "not_found", "", "this project has no SMTP server of its own; it uses the cluster's default")
	// ErrSMTPNoSecretKey means an SMTP password cannot be stored: the
	// cluster has no key to seal it with.
	ErrSMTPNoSecretKey = refusal(http.StatusNotImplemented, "secret_key_required", "password", "this cluster has no secret key to encrypt the SMTP password with; the operator must set --secret-key-file or EDGEBASE_SECRET_KEY")
	// ErrTemplateKindNotFound means an email template kind that does not
	// exist was named.
	ErrTemplateKindNotFound = refusal(http.StatusNotFound, "not_found", "kind", "no such email template; the kinds are verification, password-reset, sign-in-code and change-email")
)

// Status, Code, Message and Field give a *RuleError its HTTP face: 400
// naming the rule and field at fault.
func (e *RuleError) Status() int     { return http.StatusBadRequest }
func (e *RuleError) Code() string    { return "invalid_argument" }
func (e *RuleError) Message() string { return e.Error() }
func (e *RuleError) Field() string {
	if e.Index < 0 {
		return e.Part
	}
	return fmt.Sprintf("rules[%d].%s", e.Index, e.Part)
}

// Status, Code, Message and RetryAfter give a *RateLimitError its HTTP
// face: 429 with Retry-After in whole seconds (at least 1).
func (e *RateLimitError) Status() int  { return http.StatusTooManyRequests }
func (e *RateLimitError) Code() string { return "rate_limited" }
func (e *RateLimitError) Message() string {
	if e.Sends {
		return "too many emails were asked for this address or from here; try again later"
	}
	if e.Registrations {
		return "too many accounts were registered from here or in this project; try again later"
	}
	return ErrRateLimited.Error()
}
func (e *RateLimitError) RetryAfterSeconds() int {
	return max(int((e.RetryAfter+time.Second-1)/time.Second), 1)
}

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
	local, domain := s[:at], s[at+1:]
	dot := strings.IndexByte(domain, '.')
	if dot <= 0 || strings.HasSuffix(domain, ".") {
		return ErrInvalidEmail
	}
	// RFC 5321 §4.5.3.1.1: a local part is at most 64 octets.
	if len(local) > maxLocalLen {
		return ErrInvalidEmail
	}
	if _, err := idna.Lookup.ToASCII(norm.NFC.String(domain)); err != nil {
		return ErrInvalidEmail
	}
	// The local part must be a PRECIS identifier (no spaces, controls or
	// other code points that render ambiguously) written in one script, so
	// that "аlice" with a Cyrillic "а" cannot sit beside "alice".
	if _, err := precis.UsernameCasePreserved.String(local); err != nil {
		return ErrInvalidEmail
	}
	if mixedScripts(local) {
		return ErrInvalidEmail
	}
	return nil
}

// maxLocalLen is the longest local part of an address (RFC 5321).
const maxLocalLen = 64

// scripts are the scripts a local part's letters may come from; a letter of
// none of them (a rarer script) counts as its own.
var scripts = []*unicode.RangeTable{unicode.Latin, unicode.Cyrillic, unicode.Greek, unicode.Armenian, unicode.Hebrew,
	unicode.Arabic, unicode.Devanagari, unicode.Thai, unicode.Georgian, unicode.Hangul, unicode.Han, unicode.Hiragana,
	unicode.Katakana, unicode.Cherokee}

// mixedScripts reports whether s has letters of more than one script
// (Han, Hiragana and Katakana count as one: Japanese mixes them).
func mixedScripts(s string) bool {
	seen := -1
	for _, r := range s {
		if !unicode.IsLetter(r) {
			continue
		}
		script := len(scripts) // another script
		for i, t := range scripts {
			if unicode.Is(t, r) {
				script = i
				break
			}
		}
		if t := scripts[min(script, len(scripts)-1)]; t == unicode.Hiragana || t == unicode.Katakana {
			script = slices.Index(scripts, unicode.Han)
		}
		if seen >= 0 && script != seen {
			return true
		}
		seen = script
	}
	return false
}

// NormalizeEmail returns s trimmed of surrounding white space and lowercased,
// the form in which addresses are stored and looked up. Lowercasing the local
// part is not RFC-correct in theory but is what every mail provider does in
// practice, and it stops "Ada@x.io" and "ada@x.io" becoming two accounts.
func NormalizeEmail(s string) string { return keys.NormalizeEmail(s) }

// FieldError names the request field an error is about.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// DecidedRefusal is the error of a write the Decider refused in Apply
// (raftstore.ErrCodeUnauthenticated, ErrCodeForbidden, ErrCodeLastOwner), or
// nil for any other code: one place gives those results their meaning.
func DecidedRefusal(code raftstore.OpError) error {
	switch code {
	case raftstore.ErrCodeUnauthenticated:
		return ErrInvalidToken
	case raftstore.ErrCodeForbidden:
		return ErrForbidden
	case raftstore.ErrCodeLastOwner:
		return ErrLastOwner
	}
	return nil
}
