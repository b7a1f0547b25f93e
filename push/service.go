package push

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// Store is the part of the replicated tree push uses.
type Store interface {
	Txn(ctx context.Context, t *raftstore.Txn) (*raftstore.TxnResult, error)
	Get(path string) (*raftstore.Document, error)
	List(parent, after string, limit int) ([]*raftstore.Document, string, error)
	CountPrefix(prefix string) (int, error)
	CountByChild(parent string, budget int) ([]raftstore.ChildCount, bool, error)
	WaitApplied(ctx context.Context, idx uint64) error
}

// Sealer encrypts secrets at rest (the FCM service account).
type Sealer interface {
	Seal(plaintext, aad []byte) (string, error)
	Open(sealed string, aad []byte) ([]byte, error)
}

// Clock tells the time; tests move it instead of sleeping.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Caller is who makes a request: the principal of a bearer token.
type Caller struct {
	ProjectID string
	UserID    string
	Role      string
}

// IsOwner reports whether the caller may send and administer push.
func (c Caller) IsOwner() bool { return c.Role == "owner" }

// Config wires a Service. Store is required.
type Config struct {
	Store  Store
	Clock  Clock
	Sealer Sealer // nil: FCM credentials cannot be stored
	Sender Sender // nil: only the socket channel delivers
	Feed   *raftstore.Feed
	Logger *slog.Logger
	Tuning Tuning
	// Registerer receives the push metrics (nil: none are kept).
	Registerer prometheus.Registerer
	// FCMEndpoint is the operator's FCM-compatible endpoint (--fcm-endpoint;
	// "" is Google's): a service account's token_uri may name its host.
	FCMEndpoint string
}

// Tuning sizes the dispatcher.
type Tuning struct {
	// BatchSize is the most devices one claimed batch sends (FCM's SendEach
	// takes at most 500).
	BatchSize int
	// InFlight is how many batches are being sent at once, over all jobs.
	InFlight int
	// Poll is how often the leader looks for due work besides the change
	// feed's wake-ups (it also lets a moved test clock take effect).
	Poll time.Duration
}

// DefaultInFlight is n, or the default batches in flight (8) when n <= 0.
func DefaultInFlight(n int) int {
	if n <= 0 {
		return 8
	}
	return n
}

func (t Tuning) withDefaults() Tuning {
	if t.BatchSize <= 0 || t.BatchSize > 500 {
		t.BatchSize = 500
	}
	t.InFlight = DefaultInFlight(t.InFlight)
	if t.Poll <= 0 {
		t.Poll = 100 * time.Millisecond
	}
	return t
}

// Service is the push area: request-path operations, plus the leader's
// dispatcher and scheduler (Run).
type Service struct {
	store  Store
	clock  Clock
	sealer Sealer
	sender Sender
	feed   *raftstore.Feed
	logger *slog.Logger
	tuning Tuning
	// fcmEndpoint is the operator's FCM endpoint (Config.FCMEndpoint).
	fcmEndpoint string
	// metrics is nil when off.
	metrics *pushMetrics
	// zones caches loaded time zones: LoadLocation reads the zone data
	// each time, and the dispatcher needs one per recipient.
	zones sync.Map // name → *time.Location
}

// zone loads an IANA zone through the cache (UTC when unknown).
func (s *Service) zone(name string) *time.Location {
	if l, ok := s.zones.Load(name); ok {
		return l.(*time.Location)
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		return time.UTC
	}
	s.zones.Store(name, l)
	return l
}

// NewService builds the service.
func NewService(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("push: Store is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Service{store: cfg.Store, clock: cfg.Clock, sealer: cfg.Sealer, sender: cfg.Sender, feed: cfg.Feed,
		logger: cfg.Logger, tuning: cfg.Tuning.withDefaults(), fcmEndpoint: cfg.FCMEndpoint}
	var err error
	if s.metrics, err = newPushMetrics(cfg.Registerer, s); err != nil {
		return nil, fmt.Errorf("push: register metrics: %w", err)
	}
	return s, nil
}

func (s *Service) now() time.Time { return s.clock.Now() }

// ownerOnly refuses callers who may only receive.
func ownerOnly(c Caller, what string) error {
	if !c.IsOwner() {
		return withMsg(ErrForbidden, "only an owner may "+what, "")
	}
	return nil
}

// commit runs a transaction built by build from the current state, again
// after every failed condition, until it commits or ctx ends.
func (s *Service) commit(ctx context.Context, build func() (*raftstore.Txn, error)) (*raftstore.TxnResult, error) {
	res, _, err := raftstore.Guarded(ctx, s.store, func() (*raftstore.Txn, error) {
		t, err := build()
		if err != nil {
			return nil, err
		}
		t.Time = s.now().UnixNano()
		return t, nil
	})
	if err != nil {
		return nil, err
	}
	if !res.OK() {
		return nil, fmt.Errorf("push: transaction refused: %s", res.Err)
	}
	return res, nil
}

func revOf(d *raftstore.Document) uint64 {
	if d == nil {
		return 0
	}
	return d.Revision
}

// ---- the project switch -------------------------------------------------

// Enabled reports whether push is on for the project (it is until an owner
// turns it off).
func (s *Service) Enabled(pid string) (bool, error) {
	d, err := s.store.Get(keys.PushSettings(pid))
	if err != nil {
		return false, err
	}
	if d == nil {
		return true, nil
	}
	var st settings
	if err := json.Unmarshal(d.Data, &st); err != nil {
		return false, fmt.Errorf("decode push settings: %w", err)
	}
	return st.Enabled, nil
}

// SetEnabled turns push on or off for the caller's project.
func (s *Service) SetEnabled(ctx context.Context, c Caller, enabled bool) (uint64, error) {
	if err := ownerOnly(c, "turn push on or off"); err != nil {
		return 0, err
	}
	res, err := s.store.Txn(ctx, &raftstore.Txn{Time: s.now().UnixNano(), Ops: []raftstore.Op{
		{Kind: raftstore.OpPut, Path: keys.PushSettings(c.ProjectID), Data: mustJSON(settings{Enabled: enabled})}}})
	if err != nil {
		return 0, err
	}
	return res.Revision, nil
}

// ---- FCM credentials ----------------------------------------------------

// CredentialsInfo describes stored credentials without revealing the key.
type CredentialsInfo struct {
	Configured  bool   `json:"configured"`
	FCMProject  string `json:"fcmProjectId,omitempty"`
	ClientEmail string `json:"clientEmail,omitempty"`
	UpdatedAt   string `json:"updatedAt,omitempty"`
}

type storedCredentials struct {
	CredentialsInfo
	Sealed string `json:"sealed"`
}

// serviceAccount is the part of a Firebase service-account file we check.
type serviceAccount struct {
	Type         string `json:"type"`
	ProjectID    string `json:"project_id"`
	PrivateKeyID string `json:"private_key_id"`
	PrivateKey   string `json:"private_key"`
	ClientEmail  string `json:"client_email"`
	TokenURI     string `json:"token_uri"`
}

func credentialsAAD(pid string) []byte { return []byte("edgebase fcm credentials\x00" + pid) }

// ParseServiceAccount checks a service-account JSON file as Firebase gives
// it; its token_uri must pass CheckTokenURI against fcmEndpoint.
func ParseServiceAccount(raw []byte, fcmEndpoint string) (*serviceAccount, error) {
	var sa serviceAccount
	if err := json.Unmarshal(raw, &sa); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, fieldErr(te.Field, te.Field+" must be a string")
		}
		return nil, fieldErr("", "the body must be the service-account JSON file from the Firebase console")
	}
	switch {
	case sa.Type != "service_account":
		return nil, fieldErr("type", `type must be "service_account"`)
	case sa.ProjectID == "":
		return nil, fieldErr("project_id", "project_id is required")
	case sa.ClientEmail == "":
		return nil, fieldErr("client_email", "client_email is required")
	case sa.PrivateKey == "":
		return nil, fieldErr("private_key", "private_key is required")
	}
	block, _ := pem.Decode([]byte(sa.PrivateKey))
	if block == nil {
		return nil, fieldErr("private_key", "private_key is not a PEM key")
	}
	// Google signs service-account assertions with RS256 only.
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	}
	if _, rsaKey := key.(*rsa.PrivateKey); err != nil || !rsaKey {
		return nil, fieldErr("private_key", "private_key is not an RSA private key")
	}
	if err := CheckTokenURI(sa.TokenURI, fcmEndpoint); err != nil {
		return nil, fieldErr("token_uri", err.Error())
	}
	return &sa, nil
}

// SetCredentials stores the project's FCM service account, sealed.
func (s *Service) SetCredentials(ctx context.Context, c Caller, raw []byte) (*CredentialsInfo, uint64, error) {
	if err := ownerOnly(c, "set the FCM credentials"); err != nil {
		return nil, 0, err
	}
	sa, err := ParseServiceAccount(raw, s.fcmEndpoint)
	if err != nil {
		return nil, 0, err
	}
	if s.sealer == nil {
		return nil, 0, withMsg(ErrNoSecretKey, "this cluster has no secret key to encrypt FCM credentials with; the operator must set --secret-key-file or EDGEBASE_SECRET_KEY", "")
	}
	sealed, err := s.sealer.Seal(raw, credentialsAAD(c.ProjectID))
	if err != nil {
		return nil, 0, fmt.Errorf("seal fcm credentials: %w", err)
	}
	info := CredentialsInfo{Configured: true, FCMProject: sa.ProjectID, ClientEmail: sa.ClientEmail, UpdatedAt: formatTime(s.now())}
	res, err := s.store.Txn(ctx, &raftstore.Txn{Time: s.now().UnixNano(), Ops: []raftstore.Op{
		{Kind: raftstore.OpPut, Path: keys.FCMCredentials(c.ProjectID), Data: mustJSON(storedCredentials{CredentialsInfo: info, Sealed: sealed})}}})
	if err != nil {
		return nil, 0, err
	}
	return &info, res.Revision, nil
}

// Credentials describes the project's stored FCM credentials.
func (s *Service) Credentials(c Caller) (*CredentialsInfo, error) {
	if err := ownerOnly(c, "read the FCM credentials"); err != nil {
		return nil, err
	}
	d, err := s.store.Get(keys.FCMCredentials(c.ProjectID))
	if err != nil || d == nil {
		return &CredentialsInfo{}, err
	}
	var st storedCredentials
	if err := json.Unmarshal(d.Data, &st); err != nil {
		return nil, fmt.Errorf("decode fcm credentials: %w", err)
	}
	return &st.CredentialsInfo, nil
}

// openCredentials returns the project's service-account JSON and the
// revision it was stored at; nil when none is set.
func (s *Service) openCredentials(pid string) ([]byte, uint64, error) {
	d, err := s.store.Get(keys.FCMCredentials(pid))
	if err != nil || d == nil {
		return nil, 0, err
	}
	var st storedCredentials
	if err := json.Unmarshal(d.Data, &st); err != nil {
		return nil, 0, fmt.Errorf("decode fcm credentials: %w", err)
	}
	if s.sealer == nil {
		return nil, 0, errors.New("no secret key to open the FCM credentials with")
	}
	raw, err := s.sealer.Open(st.Sealed, credentialsAAD(pid))
	if err != nil {
		return nil, 0, fmt.Errorf("open fcm credentials: %w", err)
	}
	return raw, d.Revision, nil
}

// ---- devices -------------------------------------------------------------

// Register adds a device token for the caller. It is idempotent, and a token
// held by another account of the project moves to the caller (the device
// changed hands or users).
func (s *Service) Register(ctx context.Context, c Caller, token, platform string) (*Device, uint64, error) {
	if err := ValidateToken(token); err != nil {
		return nil, 0, err
	}
	if !platforms[platform] {
		return nil, 0, fieldErr("deviceInfo.platform", "deviceInfo.platform must be android, ios or web")
	}
	th := keys.DeviceTokenHash(token)
	var dev Device
	res, err := s.commit(ctx, func() (*raftstore.Txn, error) {
		owner, err := s.store.Get(keys.DeviceToken(c.ProjectID, th))
		if err != nil {
			return nil, err
		}
		var prev tokenOwner
		if owner != nil {
			if err := json.Unmarshal(owner.Data, &prev); err != nil {
				return nil, fmt.Errorf("decode token owner: %w", err)
			}
		}
		dev = Device{Token: token, Platform: platform, UserID: c.UserID, RegisteredAt: formatTime(s.now())}
		t := &raftstore.Txn{Conds: []raftstore.Cond{{Path: keys.DeviceToken(c.ProjectID, th), Kind: raftstore.CondRevision, Revision: revOf(owner)}}}
		if prev.UserID == c.UserID {
			cur, err := s.store.Get(keys.Device(c.ProjectID, c.UserID, th))
			if err != nil {
				return nil, err
			}
			if cur != nil {
				var old Device
				if json.Unmarshal(cur.Data, &old) == nil && old.Platform == platform {
					dev = old
				}
			}
		} else {
			// Adding a device: registrations of one account are serialised
			// on its lock record, so concurrent ones cannot pass the limit.
			lock, err := s.store.Get(keys.PushLock(c.ProjectID, c.UserID))
			if err != nil {
				return nil, err
			}
			n, err := s.store.CountPrefix(keys.Under(keys.DevicesDir(c.ProjectID, c.UserID)))
			if err != nil {
				return nil, err
			}
			if n >= MaxDevicesByUser {
				return nil, withMsg(ErrTooMany, fmt.Sprintf("an account may register at most %d devices; unregister one first", MaxDevicesByUser), "token")
			}
			t.Conds = append(t.Conds, raftstore.Cond{Path: keys.PushLock(c.ProjectID, c.UserID), Kind: raftstore.CondRevision, Revision: revOf(lock)})
			t.Ops = append(t.Ops, raftstore.Op{Kind: raftstore.OpPut, Path: keys.PushLock(c.ProjectID, c.UserID), Data: mustJSON(map[string]int{"devices": n + 1})})
			if prev.UserID != "" {
				t.Ops = append(t.Ops, raftstore.Op{Kind: raftstore.OpDelete, Path: keys.Device(c.ProjectID, prev.UserID, th), IfExists: true})
			}
		}
		t.Ops = append(t.Ops,
			raftstore.Op{Kind: raftstore.OpPut, Path: keys.DeviceToken(c.ProjectID, th), Data: mustJSON(tokenOwner{UserID: c.UserID})},
			raftstore.Op{Kind: raftstore.OpPut, Path: keys.Device(c.ProjectID, c.UserID, th), Data: mustJSON(dev)})
		return t, nil
	})
	if err != nil {
		return nil, 0, err
	}
	return &dev, res.Revision, nil
}

// Unregister removes one of the caller's device tokens.
func (s *Service) Unregister(ctx context.Context, c Caller, token string) (uint64, error) {
	if err := ValidateToken(token); err != nil {
		return 0, err
	}
	th := keys.DeviceTokenHash(token)
	res, err := s.commit(ctx, func() (*raftstore.Txn, error) {
		owner, err := s.store.Get(keys.DeviceToken(c.ProjectID, th))
		if err != nil {
			return nil, err
		}
		var prev tokenOwner
		if owner != nil {
			_ = json.Unmarshal(owner.Data, &prev)
		}
		if owner == nil || prev.UserID != c.UserID {
			return nil, withMsg(ErrNotFound, "this device token is not registered to your account", "token")
		}
		return &raftstore.Txn{
			Conds: []raftstore.Cond{{Path: keys.DeviceToken(c.ProjectID, th), Kind: raftstore.CondRevision, Revision: owner.Revision}},
			Ops: []raftstore.Op{
				{Kind: raftstore.OpDelete, Path: keys.DeviceToken(c.ProjectID, th)},
				{Kind: raftstore.OpDelete, Path: keys.Device(c.ProjectID, c.UserID, th), IfExists: true},
			}}, nil
	})
	if err != nil {
		return 0, err
	}
	return res.Revision, nil
}

// Devices lists the caller's registered devices.
func (s *Service) Devices(c Caller) ([]Device, error) {
	docs, _, err := s.store.List(keys.DevicesDir(c.ProjectID, c.UserID), "", MaxDevicesByUser)
	if err != nil {
		return nil, err
	}
	out := make([]Device, 0, len(docs))
	for _, d := range docs {
		var dev Device
		if json.Unmarshal(d.Data, &dev) == nil {
			out = append(out, dev)
		}
	}
	return out, nil
}

// ---- topics --------------------------------------------------------------

// Subscribe adds the caller (and so all their devices, present and future)
// to a topic. Idempotent.
func (s *Service) Subscribe(ctx context.Context, c Caller, topic string) (uint64, error) {
	if err := ValidateTopic(topic); err != nil {
		return 0, err
	}
	at := mustJSON(map[string]string{"subscribedAt": formatTime(s.now())})
	res, err := s.commit(ctx, func() (*raftstore.Txn, error) {
		// Subscriptions of one account are serialised on its lock record,
		// so concurrent ones cannot pass the limit.
		lock, err := s.store.Get(keys.PushLock(c.ProjectID, c.UserID))
		if err != nil {
			return nil, err
		}
		cur, err := s.store.Get(keys.UserTopic(c.ProjectID, c.UserID, topic))
		if err != nil {
			return nil, err
		}
		if cur == nil {
			n, err := s.store.CountPrefix(keys.Under(keys.UserTopicsDir(c.ProjectID, c.UserID)))
			if err != nil {
				return nil, err
			}
			if n >= MaxTopicsByUser {
				return nil, withMsg(ErrTooMany, fmt.Sprintf("an account may follow at most %d topics", MaxTopicsByUser), "topic")
			}
		}
		return &raftstore.Txn{
			Conds: []raftstore.Cond{{Path: keys.PushLock(c.ProjectID, c.UserID), Kind: raftstore.CondRevision, Revision: revOf(lock)}},
			Ops: []raftstore.Op{
				{Kind: raftstore.OpPut, Path: keys.PushLock(c.ProjectID, c.UserID), Data: mustJSON(map[string]string{"topic": topic})},
				{Kind: raftstore.OpPut, Path: keys.TopicMember(c.ProjectID, topic, c.UserID), Data: at},
				{Kind: raftstore.OpPut, Path: keys.UserTopic(c.ProjectID, c.UserID, topic), Data: at},
			}}, nil
	})
	if err != nil {
		return 0, err
	}
	return res.Revision, nil
}

// Unsubscribe removes the caller from a topic. Idempotent.
func (s *Service) Unsubscribe(ctx context.Context, c Caller, topic string) (uint64, error) {
	if err := ValidateTopic(topic); err != nil {
		return 0, err
	}
	res, err := s.store.Txn(ctx, &raftstore.Txn{Time: s.now().UnixNano(), Ops: []raftstore.Op{
		{Kind: raftstore.OpDelete, Path: keys.TopicMember(c.ProjectID, topic, c.UserID), IfExists: true},
		{Kind: raftstore.OpDelete, Path: keys.UserTopic(c.ProjectID, c.UserID, topic), IfExists: true},
	}})
	if err != nil {
		return 0, err
	}
	return res.Revision, nil
}

// Topics lists the topics the caller follows.
func (s *Service) Topics(c Caller) ([]string, error) {
	docs, _, err := s.store.List(keys.UserTopicsDir(c.ProjectID, c.UserID), "", MaxTopicsByUser)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(docs))
	for _, d := range docs {
		out = append(out, keys.Base(d.Path))
	}
	return out, nil
}

// ---- preferences ---------------------------------------------------------

// Prefs returns the caller's preferences, defaults filled in.
func (s *Service) Prefs(c Caller) (Prefs, error) {
	d, err := s.store.Get(keys.Prefs(c.ProjectID, c.UserID))
	if err != nil {
		return Prefs{}, err
	}
	if d == nil {
		return DefaultPrefs(), nil
	}
	return decodePrefs(d.Data), nil
}

// SetPrefs changes the fields the update names and returns the result.
func (s *Service) SetPrefs(ctx context.Context, c Caller, u *PrefsUpdate) (Prefs, uint64, error) {
	if u.Empty() {
		return Prefs{}, 0, fieldErr("", "name at least one preference field (pushEnabled, emailEnabled, marketingEnabled, securityEnabled, quietHoursEnabled, quietHoursStart, quietHoursEnd, timezone)")
	}
	var out Prefs
	res, err := s.commit(ctx, func() (*raftstore.Txn, error) {
		d, err := s.store.Get(keys.Prefs(c.ProjectID, c.UserID))
		if err != nil {
			return nil, err
		}
		p := DefaultPrefs()
		if d != nil {
			p = decodePrefs(d.Data)
		}
		if err := u.apply(&p); err != nil {
			return nil, err
		}
		out = p
		return &raftstore.Txn{
			Conds: []raftstore.Cond{{Path: keys.Prefs(c.ProjectID, c.UserID), Kind: raftstore.CondRevision, Revision: revOf(d)}},
			Ops:   []raftstore.Op{{Kind: raftstore.OpPut, Path: keys.Prefs(c.ProjectID, c.UserID), Data: mustJSON(p)}},
		}, nil
	})
	if err != nil {
		return Prefs{}, 0, err
	}
	return out, res.Revision, nil
}

// ---- sending ---------------------------------------------------------------

// checkTarget validates a target and counts the devices it reaches now.
func (s *Service) checkTarget(pid string, t Target) (int, error) {
	if t.kinds() != 1 || len(t.Users) > 0 {
		return 0, fieldErr("target", `target must be exactly one of {"project":true}, {"userId":"..."} or {"topic":"..."}`)
	}
	switch {
	case t.Project:
		return s.store.CountPrefix(keys.Under(keys.AllDevices(pid)))
	case t.UserID != "":
		u, err := s.store.Get(keys.User(pid, t.UserID))
		if err != nil {
			return 0, err
		}
		if u == nil {
			return 0, withMsg(ErrNotFound, "no account of this project has this id", "userId")
		}
		return s.store.CountPrefix(keys.Under(keys.DevicesDir(pid, t.UserID)))
	default:
		if err := ValidateTopic(t.Topic); err != nil {
			return 0, err
		}
		n := 0
		after := ""
		for {
			members, next, err := s.store.List(keys.TopicDir(pid, t.Topic), after, 1000)
			if err != nil {
				return 0, err
			}
			for _, m := range members {
				k, err := s.store.CountPrefix(keys.Under(keys.DevicesDir(pid, keys.Base(m.Path))))
				if err != nil {
					return 0, err
				}
				n += k
			}
			if next == "" {
				return n, nil
			}
			after = next
		}
	}
}

// Send queues a notification to a target; the leader's dispatcher delivers
// it. Only owners send.
func (s *Service) Send(ctx context.Context, c Caller, t Target, content Content) (*Notification, uint64, error) {
	if err := ownerOnly(c, "send notifications"); err != nil {
		return nil, 0, err
	}
	if err := content.Validate(); err != nil {
		return nil, 0, err
	}
	on, err := s.Enabled(c.ProjectID)
	if err != nil {
		return nil, 0, err
	}
	if !on {
		return nil, 0, withMsg(ErrPushDisabled, "push is turned off for this project; an owner can turn it on with toggle-push", "")
	}
	return s.queue(ctx, c.ProjectID, c.UserID, t, content)
}

// queue records a notification of project pid to target t, created by
// createdBy, and its job for the leader's dispatcher, in one commit.
func (s *Service) queue(ctx context.Context, pid, createdBy string, t Target, content Content) (*Notification, uint64, error) {
	n, err := s.checkTarget(pid, t)
	if err != nil {
		return nil, 0, err
	}
	now := s.now()
	note := &Notification{ID: newID(now), ProjectID: pid, Content: content, Target: t, Status: StatusQueued,
		CreatedAt: formatTime(now), CreatedBy: createdBy, Targets: n}
	j := job{ID: newFIFOID(now), ProjectID: pid, NID: note.ID, Target: t}
	res, err := s.store.Txn(ctx, &raftstore.Txn{Time: now.UnixNano(), Ops: []raftstore.Op{
		{Kind: raftstore.OpPut, Path: keys.Notification(pid, note.ID), Data: mustJSON(note)},
		{Kind: raftstore.OpPut, Path: keys.PushJob(j.ID), Data: mustJSON(j)},
	}})
	if err != nil {
		return nil, 0, err
	}
	s.metrics.queuedOne()
	return note, res.Revision, nil
}

// QueueForTrigger queues notification nid of project pid for a trigger's
// push action (createdBy "trigger:<name>"). nid is the event's own id (24
// hex digits), and the notification is committed only when none with that
// id exists: a second delivery of the same event queues nothing and
// answers queued false, as does a project whose push is off. Refusals of
// the target or content are *Error (4xx): retrying cannot help them.
func (s *Service) QueueForTrigger(ctx context.Context, pid, nid, createdBy string, t Target, content Content) (bool, error) {
	if len(nid) != 24 || strings.Trim(nid, "0123456789abcdef") != "" {
		return false, fieldErr("id", "a trigger's notification id is 24 lowercase hex digits")
	}
	if err := content.Validate(); err != nil {
		return false, err
	}
	on, err := s.Enabled(pid)
	if err != nil || !on {
		return false, err
	}
	n, err := s.checkTarget(pid, t)
	if err != nil {
		return false, err
	}
	now := s.now()
	note := &Notification{ID: nid, ProjectID: pid, Content: content, Target: t, Status: StatusQueued,
		CreatedAt: formatTime(now), CreatedBy: createdBy, Targets: n}
	j := job{ID: newFIFOID(now), ProjectID: pid, NID: nid, Target: t}
	txn := &raftstore.Txn{Time: now.UnixNano(),
		Conds: []raftstore.Cond{{Path: keys.Notification(pid, nid), Kind: raftstore.CondNotExists, Name: "queued"}},
		Ops: []raftstore.Op{
			{Kind: raftstore.OpPut, Path: keys.Notification(pid, nid), Data: mustJSON(note)},
			{Kind: raftstore.OpPut, Path: keys.PushJob(j.ID), Data: mustJSON(j)},
		}}
	res, err := s.store.Txn(ctx, txn)
	if err != nil {
		return false, err
	}
	if res.Failed(txn) == "queued" {
		return false, nil
	}
	if !res.OK() {
		return false, fmt.Errorf("push: queue a trigger's notification: refused: %s", res.Err)
	}
	s.metrics.queuedOne()
	return true, nil
}

// SecurityNotice tells the account uid of a change to its security (a second
// factor turned on or off, a password reset) with a notification of category
// security, on every channel (quiet hours do not delay it; the account's
// securityEnabled preference, and the project's push switch, still apply).
// It is the service's own send: no caller is judged.
func (s *Service) SecurityNotice(ctx context.Context, pid, uid, title, body string) error {
	on, err := s.Enabled(pid)
	if err != nil || !on {
		return err
	}
	content := Content{Title: title, Body: body, Category: CategorySecurity, Data: map[string]string{"kind": "security"}}
	if err := content.Validate(); err != nil {
		return err
	}
	_, _, err = s.queue(ctx, pid, "system", Target{UserID: uid}, content)
	return err
}

// ---- schedules -------------------------------------------------------------

// ParseSendAt reads an RFC 3339 UTC timestamp.
func ParseSendAt(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, fieldErr("sendAt", "sendAt is required (an RFC 3339 UTC time such as 2026-12-24T18:00:00Z)")
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fieldErr("sendAt", "sendAt must be an RFC 3339 UTC time such as 2026-12-24T18:00:00Z")
	}
	if _, off := t.Zone(); off != 0 {
		return time.Time{}, fieldErr("sendAt", "sendAt must be in UTC (ending in Z or +00:00)")
	}
	return t.UTC(), nil
}

// Schedule records a notification to be sent at sendAt. A user's schedule is
// a reminder to themselves; an owner chooses the target (default: the
// whole project).
func (s *Service) Schedule(ctx context.Context, c Caller, t *Target, content Content, sendAt string) (*Schedule, uint64, error) {
	if err := content.Validate(); err != nil {
		return nil, 0, err
	}
	at, err := ParseSendAt(sendAt)
	if err != nil {
		return nil, 0, err
	}
	now := s.now()
	switch {
	case at.Before(now.Add(-PastGrace)):
		return nil, 0, fieldErr("sendAt", "sendAt is in the past")
	case at.After(now.Add(MaxScheduleAhead)):
		return nil, 0, fieldErr("sendAt", "sendAt may be at most one year ahead")
	}
	var target Target
	switch {
	case !c.IsOwner():
		if t != nil {
			return nil, 0, withMsg(ErrForbidden, "only an owner may choose the audience of a schedule; a user's schedule reminds the user", "target")
		}
		if content.Category == CategoryMarketing {
			return nil, 0, withMsg(ErrForbidden, "only an owner may schedule marketing notifications", "category")
		}
		target = Target{UserID: c.UserID}
	case t == nil:
		target = Target{Project: true}
	default:
		target = *t
		if _, err := s.checkTarget(c.ProjectID, target); err != nil {
			return nil, 0, err
		}
	}
	sc := &Schedule{ID: newID(now), ProjectID: c.ProjectID, Content: content, Target: target, SendAt: formatTime(at),
		Status: StatusScheduled, CreatedAt: formatTime(now), CreatedBy: c.UserID}
	sc.DueKey = keys.PushDueKey(at, c.ProjectID, sc.ID)
	res, err := s.store.Txn(ctx, &raftstore.Txn{Time: now.UnixNano(), Ops: []raftstore.Op{
		{Kind: raftstore.OpPut, Path: keys.Schedule(c.ProjectID, sc.ID), Data: mustJSON(sc)},
		{Kind: raftstore.OpPut, Path: keys.MySchedule(c.ProjectID, c.UserID, sc.ID), Data: mustJSON(map[string]string{"id": sc.ID})},
		{Kind: raftstore.OpPut, Path: keys.PushDue(sc.DueKey), Data: mustJSON(due{ProjectID: c.ProjectID, ScheduleID: sc.ID, SendAt: at.UnixNano()})},
	}})
	if err != nil {
		return nil, 0, err
	}
	return sc, res.Revision, nil
}

// Page is a page of a listing.
type Page[T any] struct {
	Items      []T
	NextCursor string
}

// ValidateCursor refuses cursors that could not have come from us.
func ValidateCursor(cur string) error {
	if len(cur) > 128 {
		return fieldErr("cursor", "cursor is not valid")
	}
	for i := 0; i < len(cur); i++ {
		if c := cur[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fieldErr("cursor", "cursor is not valid")
		}
	}
	return nil
}

// Schedules lists schedules, newest first: all of the project's for an
// owner, the caller's own for a user.
func (s *Service) Schedules(c Caller, limit int, cursor string) (*Page[Schedule], error) {
	if err := ValidateCursor(cursor); err != nil {
		return nil, err
	}
	dir := keys.SchedulesDir(c.ProjectID)
	if !c.IsOwner() {
		dir = keys.MySchedulesDir(c.ProjectID, c.UserID)
	}
	docs, next, err := s.store.List(dir, cursor, limit)
	if err != nil {
		return nil, err
	}
	out := &Page[Schedule]{Items: []Schedule{}, NextCursor: next}
	for _, d := range docs {
		doc := d
		if !c.IsOwner() {
			if doc, err = s.store.Get(keys.Schedule(c.ProjectID, keys.Base(d.Path))); err != nil {
				return nil, err
			}
			if doc == nil {
				continue
			}
		}
		var sc Schedule
		if err := json.Unmarshal(doc.Data, &sc); err != nil {
			return nil, fmt.Errorf("decode schedule: %w", err)
		}
		out.Items = append(out.Items, sc)
	}
	return out, nil
}

// CancelSchedule cancels a schedule that has not fired. A user may cancel
// only their own.
func (s *Service) CancelSchedule(ctx context.Context, c Caller, sid string) (*Schedule, uint64, error) {
	if err := ValidateCursor(sid); err != nil || sid == "" {
		return nil, 0, withMsg(ErrNotFound, "no such schedule", "id")
	}
	var sc Schedule
	res, err := s.commit(ctx, func() (*raftstore.Txn, error) {
		d, err := s.store.Get(keys.Schedule(c.ProjectID, sid))
		if err != nil {
			return nil, err
		}
		if d == nil {
			return nil, withMsg(ErrNotFound, "no such schedule", "id")
		}
		if err := json.Unmarshal(d.Data, &sc); err != nil {
			return nil, fmt.Errorf("decode schedule: %w", err)
		}
		if !c.IsOwner() && sc.CreatedBy != c.UserID {
			return nil, withMsg(ErrNotFound, "no such schedule", "id")
		}
		if sc.Status != StatusScheduled {
			return nil, withMsg(ErrConflict, "this schedule is "+sc.Status+" and can no longer be cancelled", "id")
		}
		sc.Status = StatusCancelled
		return &raftstore.Txn{
			Conds: []raftstore.Cond{{Path: d.Path, Kind: raftstore.CondRevision, Revision: d.Revision}},
			Ops: []raftstore.Op{
				{Kind: raftstore.OpPut, Path: d.Path, Data: mustJSON(sc)},
				{Kind: raftstore.OpDelete, Path: keys.PushDue(sc.DueKey), IfExists: true},
			}}, nil
	})
	if err != nil {
		return nil, 0, err
	}
	return &sc, res.Revision, nil
}

// ---- history ---------------------------------------------------------------

// HistoryItem is one entry of the history, for owners and users alike.
type HistoryItem struct {
	ID        string            `json:"id"`
	Title     string            `json:"title"`
	Body      string            `json:"body"`
	Data      map[string]string `json:"data"`
	Category  string            `json:"category"`
	Target    Target            `json:"target"`
	Status    string            `json:"status"`
	CreatedAt string            `json:"createdAt"`
	SentAt    *string           `json:"sentAt"`
	Targets   int               `json:"targets"`
	Delivered int               `json:"delivered"`
	Failed    int               `json:"failed"`
	Pruned    int               `json:"pruned"`
	Skipped   int               `json:"skipped"`
	Deferred  int               `json:"deferred"`
	// LastError is the last delivery error of the notification (owners only).
	LastError string `json:"lastError,omitempty"`
}

// History lists notifications newest first: what the project sent, for an
// owner; what was delivered to the caller, for a user.
func (s *Service) History(c Caller, limit int, cursor string) (*Page[HistoryItem], error) {
	if err := ValidateCursor(cursor); err != nil {
		return nil, err
	}
	dir := keys.NotificationsDir(c.ProjectID)
	if !c.IsOwner() {
		dir = keys.InboxDir(c.ProjectID, c.UserID)
	}
	docs, next, err := s.store.List(dir, cursor, limit)
	if err != nil {
		return nil, err
	}
	out := &Page[HistoryItem]{Items: make([]HistoryItem, 0, len(docs)), NextCursor: next}
	for _, d := range docs {
		var it HistoryItem
		if c.IsOwner() {
			var n Notification
			if err := json.Unmarshal(d.Data, &n); err != nil {
				return nil, fmt.Errorf("decode notification: %w", err)
			}
			it = HistoryItem{ID: n.ID, Title: n.Title, Body: n.Body, Data: n.Data, Category: n.Category, Target: n.Target,
				Status: n.Status, CreatedAt: n.CreatedAt, Targets: n.Targets, Delivered: n.Delivered, Failed: n.Failed,
				Pruned: n.Pruned, Skipped: n.Skipped, Deferred: n.Deferred, LastError: n.LastError}
			if n.SentAt != "" {
				it.SentAt = &n.SentAt
			}
		} else {
			var e InboxEntry
			if err := json.Unmarshal(d.Data, &e); err != nil {
				return nil, fmt.Errorf("decode inbox entry: %w", err)
			}
			sent := e.SentAt
			it = HistoryItem{ID: e.ID, Title: e.Title, Body: e.Body, Data: e.Data, Category: e.Category, Target: e.Target,
				Status: e.Status, CreatedAt: e.CreatedAt, SentAt: &sent, Targets: e.Devices}
		}
		if it.Data == nil {
			it.Data = map[string]string{}
		}
		out.Items = append(out.Items, it)
	}
	return out, nil
}
