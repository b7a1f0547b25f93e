package push

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// newID returns an id that sorts newest first (the time is inverted), so that
// listing a directory in key order is listing it from the most recent.
func newID(now time.Time) string {
	var b [12]byte
	binary.BigEndian.PutUint64(b[:8], ^uint64(now.UnixNano()))
	_, _ = rand.Read(b[8:])
	return hex.EncodeToString(b[:])
}

// idTime reads the time a newFIFOID was made for.
func idTime(id string) (int64, bool) {
	if len(id) < 16 {
		return 0, false
	}
	b, err := hex.DecodeString(id[:16])
	if err != nil {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(b)), true
}

// newFIFOID returns an id that sorts by the time given, oldest first: jobs
// are keyed by when they are due.
func newFIFOID(now time.Time) string {
	var b [12]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.UnixNano()))
	_, _ = rand.Read(b[8:])
	return hex.EncodeToString(b[:])
}

// Categories of notification.
const (
	CategoryGeneral   = "general"
	CategoryMarketing = "marketing"
	CategorySecurity  = "security"
)

// Platforms of a device.
var platforms = map[string]bool{"android": true, "ios": true, "web": true}

// Bounds of what is accepted. FCM refuses messages over 4096 bytes of payload,
// so a notification that could never be delivered is refused up front.
const (
	MaxTitleLen      = 256
	MaxBodyLen       = 2048
	MaxPayloadBytes  = 4000
	MaxTokenLen      = 4096
	MaxTopicLen      = 128
	MaxDevicesByUser = 100
	MaxTopicsByUser  = 100
	MaxScheduleAhead = 366 * 24 * time.Hour
	// PastGrace lets a schedule a little in the past (client clock skew) fire
	// at once; older is refused.
	PastGrace = 5 * time.Minute
)

var topicRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.~%-]*$`)

// ValidateTopic checks a topic name: FCM's characters, starting with a letter
// or digit (a "_" segment would be a reserved path), at most MaxTopicLen.
func ValidateTopic(topic string) error {
	switch {
	case topic == "":
		return fieldErr("topic", "topic is required")
	case len(topic) > MaxTopicLen:
		return fieldErr("topic", fmt.Sprintf("topic is longer than %d characters", MaxTopicLen))
	case !topicRE.MatchString(topic):
		return fieldErr("topic", "topic may hold only letters, digits and - _ . ~ %, and must start with a letter or digit")
	}
	return nil
}

// ValidateToken checks a device registration token.
func ValidateToken(token string) error {
	switch {
	case token == "":
		return fieldErr("token", "token is required")
	case len(token) > MaxTokenLen:
		return fieldErr("token", fmt.Sprintf("token is longer than %d bytes", MaxTokenLen))
	}
	for i := 0; i < len(token); i++ {
		if c := token[i]; c <= 0x20 || c >= 0x7f {
			return fieldErr("token", "token must be printable ASCII without spaces")
		}
	}
	return nil
}

// Content is what a notification says.
type Content struct {
	Title    string            `json:"title"`
	Body     string            `json:"body"`
	Data     map[string]string `json:"data,omitempty"`
	Category string            `json:"category"`
}

// reservedDataKeys are refused by FCM in the data payload.
var reservedDataKeys = map[string]bool{"from": true, "message_type": true, "collapse_key": true, "notification": true}

// ParseData turns a request's data object into string pairs: FCM carries only
// strings, so any other value is refused rather than silently converted.
func ParseData(raw json.RawMessage) (map[string]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fieldErr("data", "data must be an object of string values")
	}
	out := make(map[string]string, len(obj))
	for k, v := range obj {
		var s string
		if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &s) != nil {
			return nil, fieldErr("data."+k, "data values must be strings (FCM carries only strings)")
		}
		out[k] = s
	}
	return out, nil
}

// Validate checks a notification's content and fills the default category.
func (c *Content) Validate() error {
	if c.Category == "" {
		c.Category = CategoryGeneral
	}
	switch c.Category {
	case CategoryGeneral, CategoryMarketing, CategorySecurity:
	default:
		return fieldErr("category", "category must be general, marketing or security")
	}
	if strings.TrimSpace(c.Title) == "" {
		return fieldErr("title", "title is required")
	}
	if utf8.RuneCountInString(c.Title) > MaxTitleLen {
		return fieldErr("title", fmt.Sprintf("title is longer than %d characters", MaxTitleLen))
	}
	if utf8.RuneCountInString(c.Body) > MaxBodyLen {
		return fieldErr("body", fmt.Sprintf("body is longer than %d characters", MaxBodyLen))
	}
	size := len(c.Title) + len(c.Body)
	for k, v := range c.Data {
		lk := strings.ToLower(k)
		if k == "" || reservedDataKeys[lk] || strings.HasPrefix(lk, "google.") || strings.HasPrefix(lk, "gcm.") {
			return fieldErr("data."+k, "data key "+fmt.Sprintf("%q", k)+" is reserved by FCM")
		}
		size += len(k) + len(v)
	}
	if size > MaxPayloadBytes {
		return fieldErr("data", fmt.Sprintf("title, body and data together exceed %d bytes, more than FCM delivers", MaxPayloadBytes))
	}
	return nil
}

// Target is the audience of a notification: exactly one field is set.
type Target struct {
	Project bool     `json:"project,omitempty"`
	UserID  string   `json:"userId,omitempty"`
	Topic   string   `json:"topic,omitempty"`
	Users   []string `json:"users,omitempty"` // deferred deliveries (quiet hours)
}

func (t Target) kinds() int {
	n := 0
	if t.Project {
		n++
	}
	if t.UserID != "" {
		n++
	}
	if t.Topic != "" {
		n++
	}
	if len(t.Users) > 0 {
		n++
	}
	return n
}

// Notification is the record of one send: the owner's history.
type Notification struct {
	ID        string `json:"id"`
	ProjectID string `json:"projectId"`
	Content
	Target     Target `json:"target"`
	Status     string `json:"status"` // queued, sending, sent
	CreatedAt  string `json:"createdAt"`
	SentAt     string `json:"sentAt,omitempty"`
	CreatedBy  string `json:"createdBy"`
	ScheduleID string `json:"scheduleId,omitempty"`
	Targets    int    `json:"targets"`
	Delivered  int    `json:"delivered"`
	Failed     int    `json:"failed"`
	Pruned     int    `json:"pruned"`
	Skipped    int    `json:"skipped"`
	Deferred   int    `json:"deferred"`
	LastError  string `json:"lastError,omitempty"`
}

// Statuses of a notification and of a schedule.
const (
	StatusQueued    = "queued"
	StatusSending   = "sending"
	StatusSent      = "sent"
	StatusScheduled = "scheduled"
	StatusCancelled = "cancelled"
	StatusDelivered = "delivered"
)

// InboxEntry is what a user sees of a notification delivered to them; it is
// also what the realtime socket sends them.
type InboxEntry struct {
	ID        string            `json:"id"`
	Title     string            `json:"title"`
	Body      string            `json:"body"`
	Data      map[string]string `json:"data,omitempty"`
	Category  string            `json:"category"`
	Target    Target            `json:"target"`
	Status    string            `json:"status"`
	CreatedAt string            `json:"createdAt"`
	SentAt    string            `json:"sentAt"`
	Devices   int               `json:"devices"`
}

// Schedule is a notification to be sent at SendAt.
type Schedule struct {
	ID        string `json:"id"`
	ProjectID string `json:"projectId"`
	Content
	Target         Target `json:"target"`
	SendAt         string `json:"sendAt"`
	Status         string `json:"status"` // scheduled, sent, cancelled
	CreatedAt      string `json:"createdAt"`
	CreatedBy      string `json:"createdBy"`
	DueKey         string `json:"dueKey"`
	FiredAt        string `json:"firedAt,omitempty"`
	NotificationID string `json:"notificationId,omitempty"`
}

// ScheduleView is a schedule as the API shows it (without the scheduler's
// internal index key).
type ScheduleView struct {
	ID        string `json:"id"`
	ProjectID string `json:"projectId"`
	Content
	Target         Target `json:"target"`
	SendAt         string `json:"sendAt"`
	Status         string `json:"status"`
	CreatedAt      string `json:"createdAt"`
	CreatedBy      string `json:"createdBy"`
	FiredAt        string `json:"firedAt,omitempty"`
	NotificationID string `json:"notificationId,omitempty"`
}

// View is the schedule as the API shows it.
func (sc *Schedule) View() *ScheduleView {
	return &ScheduleView{ID: sc.ID, ProjectID: sc.ProjectID, Content: sc.Content, Target: sc.Target, SendAt: sc.SendAt,
		Status: sc.Status, CreatedAt: sc.CreatedAt, CreatedBy: sc.CreatedBy, FiredAt: sc.FiredAt, NotificationID: sc.NotificationID}
}

// due is an entry of the scheduler's index.
type due struct {
	ProjectID  string `json:"pid"`
	ScheduleID string `json:"sid"`
	SendAt     int64  `json:"at"`
}

// Device is a registered device token.
type Device struct {
	Token        string `json:"token"`
	Platform     string `json:"platform"`
	UserID       string `json:"userId"`
	RegisteredAt string `json:"registeredAt"`
}

// tokenOwner maps a token hash to the account holding it.
type tokenOwner struct {
	UserID string `json:"userId"`
}

// settings is a project's push switch.
type settings struct {
	Enabled bool `json:"enabled"`
}

// job is the dispatcher's committed progress on one audience of one
// notification. Users are walked in key order; Cursor is the last user
// claimed; Inflight are claimed batches not yet marked sent. A new leader
// resends the in-flight batches and goes on from Cursor.
type job struct {
	ID        string   `json:"id"`
	ProjectID string   `json:"pid"`
	NID       string   `json:"nid"`
	Target    Target   `json:"target"`
	DueAt     int64    `json:"dueAt"` // unix nanos; 0: now
	Cursor    string   `json:"cursor,omitempty"`
	Exhausted bool     `json:"exhausted,omitempty"`
	Inflight  []flight `json:"inflight,omitempty"`
	NextBatch int      `json:"nextBatch"`
}

// flight is a claimed batch: the users after After up to and including Last.
type flight struct {
	ID    int    `json:"id"`
	After string `json:"after"`
	Last  string `json:"last"`
	// ClaimedAt is when preferences were judged; a resend judges them again
	// at this time, so that users deferred by the claim stay deferred.
	ClaimedAt int64 `json:"at"`
	Skipped   int   `json:"skipped,omitempty"`
	Deferred  int   `json:"deferred,omitempty"`
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("push: marshal %T: %v", v, err))
	}
	return b
}
