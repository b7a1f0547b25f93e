package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/coder/websocket"
)

// Event kinds, the values of Event.Kind.
const (
	// KindChange is one changed document.
	KindChange = "change"
	// KindReset says the server could not resume from the revision the
	// client asked for: the state the application holds is stale and a
	// KindSnapshot event with the full current state follows.
	KindReset = "reset"
	// KindResumed says a reconnect resumed the subscription: every change
	// missed while disconnected has been delivered before it.
	KindResumed = "resumed"
	// KindSnapshot carries the full current state after a KindReset.
	KindSnapshot = "snapshot"
)

// Change types, the values of Event.Type.
const (
	TypeSet    = "set"
	TypeDelete = "delete"
	// A live query's changes (SubscribeQuery): a document entered the
	// window, changed within it (maybe moving), or left it.
	TypeAdded    = "added"
	TypeModified = "modified"
	TypeRemoved  = "removed"
)

var (
	// ErrClosed is why everything ends after Conn.Close or Conn.CloseNow.
	ErrClosed = errors.New("realtime: connection closed")
	// ErrUnsubscribed is Subscription.Err after Unsubscribe.
	ErrUnsubscribed = errors.New("realtime: unsubscribed")
	// ErrNotConnected is returned by calls that need a live connection
	// while the Conn is reconnecting.
	ErrNotConnected = errors.New("realtime: not connected")

	// errAuthRefused marks an authentication refused by message (the
	// server sent an error instead of ready): never retried.
	errAuthRefused = errors.New("authentication refused")
)

// Document is one document of a snapshot. Collection is its path without
// the project id, as in the REST API.
type Document struct {
	Collection string          `json:"collection"`
	Data       json.RawMessage `json:"data"`
	Revision   uint64          `json:"revision"`
	CreateTime string          `json:"createTime,omitempty"`
	UpdateTime string          `json:"updateTime,omitempty"`
}

// Event is what a Subscription delivers after Subscribe returned.
type Event struct {
	// Kind is KindChange, KindReset, KindResumed or KindSnapshot.
	Kind string
	// Revision: of the change (KindChange); the oldest revision the
	// server still holds (KindReset); the revision the replay reached
	// (KindResumed); the revision of the snapshot (KindSnapshot).
	Revision uint64
	// Collection, Type, Data and UpdateTime describe a change: the path of
	// the changed document, TypeSet or TypeDelete, the new data (nil for a
	// delete) and the server's update time.
	Collection string
	Type       string
	Data       json.RawMessage
	UpdateTime string
	// Documents is the full state, for KindSnapshot.
	Documents []Document
	// Index is, for a live query's change (Type TypeAdded, TypeModified or
	// TypeRemoved), the document's position in the window: after the
	// change, or for a removal before it.
	Index int
}

// Notification is a push notification sent to the connected user.
type Notification struct {
	ID       string
	Title    string
	Body     string
	Data     json.RawMessage
	Revision uint64
}

// Error is an error reported by the server: an error message
// ({"op":"error"}), or, with Status set, the HTTP error that refused the
// upgrade (header authentication, origin check).
type Error struct {
	Code    string
	Message string
	// Status is the HTTP status of a refused upgrade or REST call (Batch);
	// 0 for error messages.
	Status int
	// Field names the request field at fault, if the server named one (for
	// a batch, the refused write: "writes[3]").
	Field string
}

func (e *Error) Error() string {
	s := "realtime: " + e.Code + ": " + e.Message
	if e.Status != 0 {
		s = fmt.Sprintf("realtime: HTTP %d %s: %s", e.Status, e.Code, e.Message)
	}
	if e.Field != "" {
		s += " (" + e.Field + ")"
	}
	return s
}

// Server -> client messages: one struct for every op.
type frame struct {
	Op         string          `json:"op"`
	ID         string          `json:"id"`
	Revision   uint64          `json:"revision"`
	Documents  []Document      `json:"documents"`
	More       bool            `json:"more"`
	Collection string          `json:"collection"`
	Type       string          `json:"type"`
	Data       json.RawMessage `json:"data"`
	UpdateTime string          `json:"updateTime"`
	CreateTime string          `json:"createTime"`
	Index      *int            `json:"index"`
	Checkpoint bool            `json:"checkpoint"`
	Field      string          `json:"field"`
	Code       string          `json:"code"`
	Message    string          `json:"message"`
	UserID     string          `json:"userId"`
	Title      string          `json:"title"`
	Body       string          `json:"body"`
}

const (
	opReady        = "ready"
	opAuth         = "auth"
	opSubscribe    = "subscribe"
	opUnsubscribe  = "unsubscribe"
	opUnsubscribed = "unsubscribed"
	opSnapshot     = "snapshot"
	opResumed      = "resumed"
	opReset        = "reset"
	opChange       = "change"
	opNotification = "notification"
	opError        = "error"
	opPing         = "ping"
	opPong         = "pong"
)

// Client -> server messages.
type authMsg struct {
	Op        string `json:"op"`
	Token     string `json:"token,omitempty"`
	ProjectID string `json:"projectId,omitempty"`
	APIKey    string `json:"apiKey,omitempty"`
}

type subscribeMsg struct {
	Op         string          `json:"op"`
	ID         string          `json:"id"`
	Collection string          `json:"collection"`
	Prefix     bool            `json:"prefix,omitempty"`
	Since      *uint64         `json:"since,omitempty"`
	Query      json.RawMessage `json:"query,omitempty"`
	// MinRevision: the session's revision (Config.Session).
	MinRevision uint64 `json:"minRevision,omitempty"`
}

type idMsg struct {
	Op string `json:"op"`
	ID string `json:"id,omitempty"`
}

// nullToNil turns a JSON null into a nil RawMessage.
func nullToNil(m json.RawMessage) json.RawMessage {
	if string(m) == "null" {
		return nil
	}
	return m
}

// httpError reads the REST error shape {"error":{"code","message","field"}}
// of a refused upgrade or REST call.
func httpError(resp *http.Response) *Error {
	e := &Error{Status: resp.StatusCode, Code: fmt.Sprintf("http_%d", resp.StatusCode)}
	if resp.Body == nil {
		return e
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	e.Code, e.Message, e.Field = errorBody(resp.StatusCode, b)
	return e
}

// errorBody reads the REST error shape {"error":{"code","message","field"}}
// from an answer's body b; an answer without it (a proxy's page) gives the
// code http_<status> and its text (at most 1 KiB) as the message.
func errorBody(status int, b []byte) (code, message, field string) {
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &body) == nil && body.Error.Code != "" {
		return body.Error.Code, body.Error.Message, body.Error.Field
	}
	return fmt.Sprintf("http_%d", status), strings.TrimSpace(string(b[:min(len(b), 1024)])), ""
}

// finalCloseCodes end a connection for good: reconnecting would be refused
// again or repeat the same mistake.
var finalCloseCodes = map[websocket.StatusCode]bool{
	websocket.StatusNormalClosure:           true,
	websocket.StatusProtocolError:           true,
	websocket.StatusUnsupportedData:         true,
	websocket.StatusInvalidFramePayloadData: true,
	websocket.StatusPolicyViolation:         true,
	websocket.StatusMessageTooBig:           true,
	websocket.StatusMandatoryExtension:      true,
	4001:                                    true, // unauthenticated
	4003:                                    true, // origin not allowed
}

// isFinal reports whether err ends the connection without a reconnect:
// refused credentials or origin, a policy violation, a normal close.
// Network errors, 1001 going away, 4008 slow_consumer, 4009 lagged and 5xx
// answers are retried.
func isFinal(err error) bool {
	if errors.Is(err, ErrClosed) || errors.Is(err, errAuthRefused) {
		return true
	}
	var e *Error
	if errors.As(err, &e) && e.Status != 0 {
		return e.Status >= 400 && e.Status < 500 && e.Status != http.StatusRequestTimeout && e.Status != http.StatusTooManyRequests
	}
	return finalCloseCodes[websocket.CloseStatus(err)]
}
