package auth

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Label values. Each set is fixed so that the labels stay bounded.
const (
	loginSuccess     = "success"      // a session was opened
	loginMFARequired = "mfa_required" // the password was right; a TOTP step follows

	failBadCredentials = "bad_credentials" // unknown email or wrong password
	failBadTOTP        = "bad_totp"        // wrong, malformed or replayed code at login-verify
	failBadTicket      = "bad_ticket"      // unknown, used, expired or void login ticket
	failRateLimited    = "rate_limited"    // refused by the brute-force limits
	failError          = "error"           // anything else (unavailable store, cancelled request)

	actionLogin          = "login"
	actionLoginVerify    = "login_verify"
	actionChangePassword = "change_password"
	actionResetPassword  = "reset_password"
	actionVerifyReset    = "verify_reset"
	actionDisableTOTP    = "disable_totp"
	actionReauthenticate = "reauthenticate"
	actionRegister       = "register"
)

// authMetrics are the auth collectors, every child created up front. A nil
// *authMetrics records nothing.
type authMetrics struct {
	logins      map[string]prometheus.Counter
	failures    map[string]prometheus.Counter
	rateLimited map[string]prometheus.Counter
}

func newAuthMetrics(reg prometheus.Registerer) (*authMetrics, error) {
	if reg == nil {
		return nil, nil
	}
	logins := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edgebase_auth_logins_total",
		Help: `Successful logins by result: "success" opened a session (password, or TOTP at login-verify), "mfa_required" issued a ticket for the TOTP step.`,
	}, []string{"result"})
	failures := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edgebase_auth_login_failures_total",
		Help: "Failed logins (login and login-verify) by reason.",
	}, []string{"reason"})
	limited := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edgebase_auth_rate_limited_total",
		Help: "Attempts refused by the brute-force limits, by action.",
	}, []string{"action"})
	for _, c := range []prometheus.Collector{logins, failures, limited} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m := &authMetrics{logins: map[string]prometheus.Counter{}, failures: map[string]prometheus.Counter{},
		rateLimited: map[string]prometheus.Counter{}}
	for _, v := range []string{loginSuccess, loginMFARequired} {
		m.logins[v] = logins.WithLabelValues(v)
	}
	for _, v := range []string{failBadCredentials, failBadTOTP, failBadTicket, failRateLimited, failError} {
		m.failures[v] = failures.WithLabelValues(v)
	}
	for _, v := range append([]string{actionLogin, actionLoginVerify, actionChangePassword, actionResetPassword, actionVerifyReset, actionDisableTOTP, actionReauthenticate, actionRegister}, emailActions...) {
		m.rateLimited[v] = limited.WithLabelValues(v)
	}
	return m, nil
}

// login counts the outcome of a password login.
func (m *authMetrics) login(res *LoginResult, err error) {
	switch {
	case m == nil:
	case err == nil && res.RequiresTOTP:
		m.logins[loginMFARequired].Inc()
	case err == nil:
		m.logins[loginSuccess].Inc()
	case errors.Is(err, ErrInvalidCredentials):
		m.failures[failBadCredentials].Inc()
	default:
		m.failure(err)
	}
}

// loginVerify counts the outcome of the TOTP step of a login.
func (m *authMetrics) loginVerify(err error) {
	switch {
	case m == nil:
	case err == nil:
		m.logins[loginSuccess].Inc()
	case errors.Is(err, ErrInvalidCode):
		m.failures[failBadTOTP].Inc()
	case errors.Is(err, ErrInvalidTicket):
		m.failures[failBadTicket].Inc()
	default:
		m.failure(err)
	}
}

func (m *authMetrics) failure(err error) {
	if errors.Is(err, ErrRateLimited) {
		m.failures[failRateLimited].Inc()
	} else {
		m.failures[failError].Inc()
	}
}

// limited counts an attempt the limits refused.
func (m *authMetrics) limited(action string) {
	if m == nil {
		return
	}
	if c := m.rateLimited[action]; c != nil {
		c.Inc()
	}
}

// RegisterMetrics registers the hashing queue's collectors on reg: the
// callers waiting (edgebase_auth_hash_queue), those refused at a full queue
// (edgebase_auth_hash_shed_total) and the time of each hash
// (edgebase_auth_hash_seconds). The node owning h calls it once.
func (h *Hasher) RegisterMetrics(reg prometheus.Registerer) error {
	queue := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "edgebase_auth_hash_queue",
		Help: "Callers waiting for a password-hashing slot (at most the queue bound, --hash-queue).",
	}, func() float64 { return float64(h.queued()) })
	shed := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "edgebase_auth_hash_shed_total",
		Help: "Password hashes refused at once because the hashing queue was full (answered 503 overloaded with Retry-After).",
	}, func() float64 { return float64(h.shedCount()) })
	for _, c := range []prometheus.Collector{queue, shed, h.seconds} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("auth: register hashing metrics: %w", err)
		}
	}
	return nil
}
