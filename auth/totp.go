package auth

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"image/png"
	"strings"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// TOTP parameters (RFC 6238). SHA-1, 6 digits and 30 s are what every
// authenticator app understands; one step of drift either way is accepted.
const (
	totpPeriod = 30
	totpSkew   = 1
	// RecoveryCodeCount recovery codes are issued when TOTP is confirmed.
	RecoveryCodeCount = 10
	// recoveryCodeLen characters of [a-z2-7]: 80 bits per code.
	recoveryCodeLen = 16
	qrSize          = 256
)

var totpOpts = totp.ValidateOpts{Period: totpPeriod, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1}

// Enrollment is a pending authenticator: the secret to type or scan.
type Enrollment struct {
	Secret     string `json:"secret"`
	OtpauthURL string `json:"otpauthUrl"`
	QRPng      string `json:"qrPng"`
}

// Confirmation is the answer to a confirmed enrollment. The recovery codes
// are shown only here.
type Confirmation struct {
	TOTPEnabled   bool     `json:"totpEnabled"`
	RecoveryCodes []string `json:"recoveryCodes"`
	Revision      uint64   `json:"-"`
}

// VerifyResult is a proven code: a single-use token for reset-password.
type VerifyResult struct {
	VerifyToken string `json:"verifyToken"`
	ExpiresIn   int    `json:"expiresIn"`
	Revision    uint64 `json:"-"`
}

// sealAAD binds a sealed secret to its account.
func sealAAD(pid, uid string) []byte { return []byte("totp\x00" + pid + "\x00" + uid) }

// Enroll starts (or restarts) TOTP enrollment: a new pending secret, sealed
// at rest, shown once as text, otpauth URL and QR code.
func (s *Service) Enroll(ctx context.Context, p *Principal) (*Enrollment, uint64, error) {
	if s.sealer == nil {
		return nil, 0, ErrNoSecretKey
	}
	issuer := "edgebase"
	var proj project
	if ok, err := s.getJSON(keys.Project(p.ProjectID), &proj); err != nil {
		return nil, 0, err
	} else if ok && proj.Name != "" {
		issuer = proj.Name
	}
	key, err := totp.Generate(totp.GenerateOpts{
		Issuer: issuer, AccountName: p.Email, Period: totpPeriod, SecretSize: 20,
		Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1,
	})
	if err != nil {
		return nil, 0, fmt.Errorf("generate totp key: %w", err)
	}
	sealed, err := s.sealer.Seal([]byte(key.Secret()), sealAAD(p.ProjectID, p.UserID))
	if err != nil {
		return nil, 0, err
	}
	_, rev, err := s.updateAccount(ctx, p.ProjectID, p.UserID, func(acc *account) ([]raftstore.Op, []raftstore.Cond, error) {
		if acc.totpEnabled() {
			return nil, nil, ErrTOTPEnabled
		}
		proof, err := s.recentProof(p)
		if err != nil {
			return nil, nil, err
		}
		acc.TOTP = &totpState{Pending: sealed}
		return nil, []raftstore.Cond{proof}, nil
	})
	if err != nil {
		return nil, 0, err
	}
	s.securityChanged(ctx, p.ProjectID, p.UserID, "totp-enrolled")
	img, err := key.Image(qrSize, qrSize)
	if err != nil {
		return nil, 0, fmt.Errorf("render qr code: %w", err)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, 0, fmt.Errorf("encode qr code: %w", err)
	}
	return &Enrollment{Secret: key.Secret(), OtpauthURL: key.URL(), QRPng: base64.StdEncoding.EncodeToString(buf.Bytes())}, rev, nil
}

// Confirm turns TOTP on once the caller proves the pending secret with a
// code, and returns ten recovery codes.
func (s *Service) Confirm(ctx context.Context, p *Principal, code string) (*Confirmation, error) {
	if s.sealer == nil {
		return nil, ErrNoSecretKey
	}
	codes, hashes, salt, err := newRecoveryCodes()
	if err != nil {
		return nil, err
	}
	_, rev, err := s.updateAccount(ctx, p.ProjectID, p.UserID, func(acc *account) ([]raftstore.Op, []raftstore.Cond, error) {
		if acc.totpEnabled() {
			return nil, nil, ErrTOTPEnabled
		}
		if acc.TOTP == nil || acc.TOTP.Pending == "" {
			return nil, nil, ErrTOTPNotPending
		}
		proof, err := s.recentProof(p)
		if err != nil {
			return nil, nil, err
		}
		secret, err := s.sealer.Open(acc.TOTP.Pending, sealAAD(p.ProjectID, p.UserID))
		if err != nil {
			return nil, nil, err
		}
		step, ok := s.matchTOTP(string(secret), normalizeCode(code), 0)
		if !ok {
			return nil, nil, ErrInvalidCode
		}
		acc.TOTP = &totpState{Secret: acc.TOTP.Pending, LastStep: step, RecoverySalt: salt, Recovery: hashes}
		acc.TOTPEnabled = true
		return []raftstore.Op{s.auditOp(p.ProjectID, AuditEvent{Type: AuditTOTPEnabled, UserID: p.UserID})}, []raftstore.Cond{proof}, nil
	})
	if err != nil {
		return nil, err
	}
	s.securityChanged(ctx, p.ProjectID, p.UserID, "totp-enabled")
	return &Confirmation{TOTPEnabled: true, RecoveryCodes: codes, Revision: rev}, nil
}

// useCode checks a TOTP or recovery code against an enabled account and
// records its use on acc (the last accepted step, or the spent recovery
// code). It reports whether the code was good.
func (s *Service) useCode(acc *account, pid, code string) (bool, error) {
	if !acc.totpEnabled() {
		return false, nil
	}
	code = normalizeCode(code)
	if isTOTPShape(code) {
		secret, err := s.sealer.Open(acc.TOTP.Secret, sealAAD(pid, acc.ID))
		if err != nil {
			return false, err
		}
		step, ok := s.matchTOTP(string(secret), code, acc.TOTP.LastStep)
		if ok {
			acc.TOTP.LastStep = step
		}
		return ok, nil
	}
	if len(code) != recoveryCodeLen {
		return false, nil
	}
	h := recoveryHash(acc.TOTP.RecoverySalt, code)
	found := -1
	for i, stored := range acc.TOTP.Recovery {
		if EqualHash(stored, h) {
			found = i
		}
	}
	if found < 0 {
		return false, nil
	}
	acc.TOTP.Recovery = append(acc.TOTP.Recovery[:found:found], acc.TOTP.Recovery[found+1:]...)
	return true, nil
}

// proveCode is useCode inside an account update that reveals a success: a
// wrong code is ErrInvalidCode, a right one returns the limit conditions the
// revealing commit must carry (see limitGate).
func (s *Service) proveCode(acc *account, pid, code string, at attempt) ([]raftstore.Cond, error) {
	good, err := s.useCode(acc, pid, code)
	if err != nil {
		return nil, err
	}
	if !good {
		return nil, ErrInvalidCode
	}
	return s.limitGate(at)
}

// matchTOTP returns the time step whose code equals code, among the current
// step ±totpSkew, refusing steps at or before lastStep (replays). Every
// candidate is compared in constant time.
func (s *Service) matchTOTP(secret, code string, lastStep int64) (int64, bool) {
	if !isTOTPShape(code) {
		return 0, false
	}
	cur := s.now().Unix() / totpPeriod
	var matched int64
	ok := false
	for st := cur - totpSkew; st <= cur+totpSkew; st++ {
		want, err := totp.GenerateCodeCustom(secret, time.Unix(st*totpPeriod, 0), totpOpts)
		if err != nil {
			return 0, false
		}
		if subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 && st > lastStep && !ok {
			matched, ok = st, true
		}
	}
	return matched, ok
}

// normalizeCode drops the spaces and dashes people type in codes and
// lowercases recovery codes.
func normalizeCode(code string) string {
	return strings.ToLower(strings.Map(func(r rune) rune {
		if r == ' ' || r == '-' {
			return -1
		}
		return r
	}, code))
}

func isTOTPShape(code string) bool {
	if len(code) != 6 {
		return false
	}
	for i := 0; i < len(code); i++ {
		if code[i] < '0' || code[i] > '9' {
			return false
		}
	}
	return true
}

// newRecoveryCodes returns codes formatted for people (xxxx-xxxx-xxxx-xxxx),
// their salted hashes for storage, and the salt.
func newRecoveryCodes() (codes, hashes []string, salt string, err error) {
	saltRaw := make([]byte, 16)
	if _, err := rand.Read(saltRaw); err != nil {
		return nil, nil, "", fmt.Errorf("random salt: %w", err)
	}
	salt = hex.EncodeToString(saltRaw)
	for i := 0; i < RecoveryCodeCount; i++ {
		raw := make([]byte, recoveryCodeLen)
		if _, err := rand.Read(raw); err != nil {
			return nil, nil, "", fmt.Errorf("random recovery code: %w", err)
		}
		for j, c := range raw {
			raw[j] = idAlphabet[c&31]
		}
		c := string(raw)
		codes = append(codes, c[0:4]+"-"+c[4:8]+"-"+c[8:12]+"-"+c[12:16])
		hashes = append(hashes, recoveryHash(salt, c))
	}
	return codes, hashes, salt, nil
}

func recoveryHash(salt, code string) string {
	sum := sha256.Sum256([]byte("recovery\x00" + salt + "\x00" + code))
	return hex.EncodeToString(sum[:])
}

// LoginVerify completes a login with a second factor: the ticket from login
// and a TOTP or recovery code give a session. A ticket is single use, lasts
// TicketTTL and is void after MaxTicketFailures wrong codes.
func (s *Service) LoginVerify(ctx context.Context, pid, ticketTok, code, addr string) (*AuthResult, error) {
	res, err := s.loginVerify(ctx, pid, ticketTok, code, addr)
	s.metrics.loginVerify(err)
	return res, err
}

func (s *Service) loginVerify(ctx context.Context, pid, ticketTok, code, addr string) (*AuthResult, error) {
	if ticketTok == "" {
		return nil, ErrInvalidTicket
	}
	tpath := keys.Ticket(HashToken(ticketTok))
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("login-verify: %w", err)
		}
		tdoc, err := s.store.Get(tpath)
		if err != nil {
			return nil, err
		}
		if tdoc == nil {
			return nil, ErrInvalidTicket
		}
		var t ticket
		if err := decodeJSON(tdoc, &t); err != nil {
			return nil, err
		}
		if t.ProjectID != pid || s.now().Unix() >= t.ExpiresAt || t.Failures >= MaxTicketFailures {
			return nil, ErrInvalidTicket
		}
		acc, arev, err := s.accountRev(pid, t.UserID)
		if err != nil {
			return nil, err
		}
		if acc != nil && acc.Disabled {
			return nil, ErrAccountDisabled
		}
		if acc == nil || acc.SessionGen != t.Gen || !acc.totpEnabled() {
			return nil, ErrInvalidTicket
		}
		at := attempt{kind: kindCode, action: actionLoginVerify, pid: pid, email: acc.Email, addr: addr}
		if err := s.checkLimits(at); err != nil {
			return nil, err
		}
		good, err := s.useCode(acc, pid, code)
		if err != nil {
			return nil, err
		}
		now := s.now()
		if !good {
			// The wrong code counts against the limits and the ticket in one
			// transaction; on a conflict both are judged again from scratch.
			t.Failures++
			op := raftstore.Op{Kind: raftstore.OpPut, Path: tpath, Data: mustJSON(t)}
			if t.Failures >= MaxTicketFailures {
				op = raftstore.Op{Kind: raftstore.OpDelete, Path: tpath}
			}
			txn := &raftstore.Txn{Time: now.UnixNano(),
				Conds: []raftstore.Cond{{Path: tpath, Kind: raftstore.CondRevision, Revision: tdoc.Revision}},
				Ops:   []raftstore.Op{op}}
			release, err := s.holdFailGate(ctx)
			if err != nil {
				return nil, fmt.Errorf("login-verify: %w", err)
			}
			res, err := s.commitFailure(ctx, txn, at)
			release()
			if err != nil {
				return nil, err
			}
			if !res.OK() {
				if err := s.store.WaitApplied(ctx, res.Revision); err != nil {
					return nil, err
				}
				continue
			}
			return nil, ErrInvalidCode
		}
		gate, err := s.limitGate(at)
		if err != nil {
			return nil, err
		}
		token, sessOps, err := s.newSessionFor(pid, acc.ID, acc.SessionGen, clientOf(ctx, addr))
		if err != nil {
			return nil, err
		}
		res, err := s.store.Txn(ctx, &raftstore.Txn{Time: now.UnixNano(),
			Conds: append([]raftstore.Cond{
				{Path: tpath, Kind: raftstore.CondRevision, Revision: tdoc.Revision},
				{Path: keys.User(pid, acc.ID), Kind: raftstore.CondRevision, Revision: arev},
			}, gate...),
			Ops: append([]raftstore.Op{
				{Kind: raftstore.OpDelete, Path: tpath},
				{Kind: raftstore.OpPut, Path: keys.User(pid, acc.ID), Data: mustJSON(acc)},
				s.auditOp(pid, AuditEvent{Type: AuditLogin, UserID: acc.ID, Address: addr, Time: now, Detail: map[string]string{"method": "password+totp"}}),
			}, sessOps...)})
		if err != nil {
			return nil, err
		}
		if res.OK() {
			return &AuthResult{Token: token, User: acc.User, Revision: res.Revision}, nil
		}
		// A concurrent attempt used the ticket or a code: look again; a
		// replayed code or a used ticket fails on the next round.
		if err := s.store.WaitApplied(ctx, res.Revision); err != nil {
			return nil, err
		}
	}
}

// commitFailure adds a's counters to txn and commits it.
func (s *Service) commitFailure(ctx context.Context, txn *raftstore.Txn, a attempt) (*raftstore.TxnResult, error) {
	if err := s.addFailure(txn, a); err != nil {
		return nil, err
	}
	return s.store.Txn(ctx, txn)
}

// VerifyForReset proves a TOTP or recovery code for the account of email
// and returns a single-use token for reset-password. Unknown emails,
// accounts without TOTP and wrong codes all answer ErrInvalidCode.
func (s *Service) VerifyForReset(ctx context.Context, pid, email, code, addr string) (*VerifyResult, error) {
	at := attempt{kind: kindCode, action: actionVerifyReset, pid: pid, email: email, addr: addr}
	if err := s.checkLimits(at); err != nil {
		return nil, err
	}
	idx := emailIndex{}
	if _, err := s.getJSON(keys.Email(pid, email), &idx); err != nil {
		return nil, err
	}
	tok, err := NewToken(verifyPrefix)
	if err != nil {
		return nil, err
	}
	_, rev, err := s.updateAccount(ctx, pid, idx.UserID, func(acc *account) ([]raftstore.Op, []raftstore.Cond, error) {
		gate, err := s.proveCode(acc, pid, code, at)
		if err != nil {
			return nil, nil, err
		}
		g := grant{ProjectID: pid, UserID: acc.ID, Gen: acc.SessionGen, ExpiresAt: s.now().Add(VerifyTTL).Unix()}
		return []raftstore.Op{{Kind: raftstore.OpPut, Path: keys.Verify(HashToken(tok)), Data: mustJSON(g)}}, gate, nil
	})
	if err == ErrInvalidToken || err == ErrInvalidCode {
		// ErrInvalidToken: no such account. Same answer as a wrong code.
		if err := s.recordFailure(ctx, at); err != nil {
			return nil, err
		}
		return nil, ErrInvalidCode
	}
	if err != nil {
		return nil, err
	}
	return &VerifyResult{VerifyToken: tok, ExpiresIn: int(VerifyTTL / time.Second), Revision: rev}, nil
}

// DisableTOTP turns the second factor off after a current TOTP or recovery
// code proves the caller still holds it.
func (s *Service) DisableTOTP(ctx context.Context, p *Principal, code, addr string) (*User, uint64, error) {
	at := attempt{kind: kindCode, action: actionDisableTOTP, pid: p.ProjectID, email: p.Email, addr: addr}
	if err := s.checkLimits(at); err != nil {
		return nil, 0, err
	}
	acc, rev, err := s.updateAccount(ctx, p.ProjectID, p.UserID, func(acc *account) ([]raftstore.Op, []raftstore.Cond, error) {
		if !acc.totpEnabled() {
			return nil, nil, ErrTOTPNotEnabled
		}
		proof, err := s.recentProof(p)
		if err != nil {
			return nil, nil, err
		}
		gate, err := s.proveCode(acc, p.ProjectID, code, at)
		if err != nil {
			return nil, nil, err
		}
		acc.TOTP = nil
		acc.TOTPEnabled = false
		return []raftstore.Op{s.auditOp(p.ProjectID, AuditEvent{Type: AuditTOTPDisabled, UserID: p.UserID, Address: addr})}, append(gate, proof), nil
	})
	if err == ErrInvalidCode {
		if rerr := s.recordFailure(ctx, at); rerr != nil {
			return nil, 0, rerr
		}
	}
	if err != nil {
		return nil, 0, err
	}
	s.securityChanged(ctx, p.ProjectID, p.UserID, "totp-disabled")
	return &acc.User, rev, nil
}
