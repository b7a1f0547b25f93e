package realtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/edgebase/edgebase/raftstore"
)

// Close codes (WebSocket close status) of the protocol; see docs/api.md.
const (
	closeUnauthenticated = 4001 // auth failed or the session ended
	closeOrigin          = 4003 // Origin not allowed for the project
	closeSlowConsumer    = 4008 // the client did not read fast enough
	closeLagged          = 4009 // the node's stream restarted; resume with since
)

// clientMsg is any message a client sends.
type clientMsg struct {
	Op         string  `json:"op"`
	ID         string  `json:"id"`
	Collection string  `json:"collection"`
	Prefix     bool    `json:"prefix"`
	Since      *uint64 `json:"since"`
	// MinRevision: start the snapshot or replay only once the node has
	// applied this revision (session consistency). Raw so that a bad value
	// is refused with invalid_argument rather than as unreadable JSON.
	MinRevision json.RawMessage `json:"minRevision"`
	// Query is a live query (query.Query's JSON) instead of Collection.
	Query     json.RawMessage `json:"query"`
	Token     string          `json:"token"`
	ProjectID string          `json:"projectId"`
	APIKey    string          `json:"apiKey"`
}

// docOut is a document as REST shows it: the path without the project.
type docOut struct {
	Collection string          `json:"collection"`
	Data       json.RawMessage `json:"data"`
	Revision   uint64          `json:"revision"`
	CreateTime string          `json:"createTime"`
	UpdateTime string          `json:"updateTime"`
}

// parseMinRevision reads a minRevision value: a JSON number or a decimal
// string, a non-negative integer that fits in 64 bits; null or absent is 0.
func parseMinRevision(raw json.RawMessage) (uint64, error) {
	v := strings.TrimSpace(string(raw))
	if v == "" || v == "null" {
		return 0, nil
	}
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	return parseRevision(v)
}

// parseRevision parses a revision as decimal digits only (no sign, no
// exponent, no fraction): what X-Min-Revision and ?minRevision carry.
func parseRevision(v string) (uint64, error) {
	v = strings.TrimSpace(v)
	if v == "" || strings.TrimLeft(v, "0123456789") != "" {
		return 0, errBadRevision
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, errBadRevision
	}
	return n, nil
}

var errBadRevision = errors.New("minRevision must be a non-negative integer below 2^64")

func stamp(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

func userPath(full string) string {
	if i := strings.IndexByte(full, '/'); i >= 0 {
		return full[i+1:]
	}
	return full
}

func toDocOut(d *raftstore.Document) docOut {
	return docOut{Collection: userPath(d.Path), Data: d.Data, Revision: d.Revision,
		CreateTime: stamp(d.CreateTime), UpdateTime: stamp(d.UpdateTime)}
}

type snapshotMsg struct {
	Op        string   `json:"op"`
	ID        string   `json:"id"`
	Revision  uint64   `json:"revision"`
	Documents []docOut `json:"documents"`
	More      bool     `json:"more"`
}

type revMsg struct {
	Op       string `json:"op"`
	ID       string `json:"id,omitempty"`
	Revision uint64 `json:"revision"`
}

type readyMsg struct {
	Op       string `json:"op"`
	UserID   string `json:"userId"`
	Revision uint64 `json:"revision"`
}

type errorMsg struct {
	Op      string `json:"op"`
	ID      string `json:"id,omitempty"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

func encode(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only our own message structs are encoded here.
		panic("realtime: encode message: " + err.Error())
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// changeMsg is one event, encoded once for every subscription it reaches:
// only the leading {"op":"change","id":"..." differs between them.
type changeMsg struct {
	rev  uint64
	tail []byte // ,"revision":...} including the closing brace
}

func newChangeMsg(ev *raftstore.Event) *changeMsg {
	var b bytes.Buffer
	b.WriteString(`,"revision":`)
	b.WriteString(strconv.FormatUint(ev.Revision, 10))
	b.WriteString(`,"collection":`)
	b.Write(encode(userPath(ev.Path)))
	b.WriteString(`,"type":"`)
	b.WriteString(string(ev.Type))
	b.WriteString(`","data":`)
	if ev.Doc != nil {
		b.Write(ev.Doc.Data)
		b.WriteString(`,"updateTime":"`)
		b.WriteString(stamp(ev.Doc.UpdateTime))
		b.WriteString(`"}`)
	} else {
		b.WriteString(`null}`)
	}
	return &changeMsg{rev: ev.Revision, tail: b.Bytes()}
}

// changeHead is the part of a subscription's change messages before the
// event's tail, encoded once per subscription.
func changeHead(id string) []byte {
	return append([]byte(`{"op":"change","id":`), encode(id)...)
}

func (m *changeMsg) forSub(head []byte) []byte {
	out := make([]byte, 0, len(head)+len(m.tail))
	out = append(out, head...)
	return append(out, m.tail...)
}

// notificationMsg is a committed notification document as a message: its
// fields plus op, id and revision.
func notificationMsg(ev *raftstore.Event, id string) []byte {
	fields := map[string]json.RawMessage{}
	if ev.Doc != nil {
		_ = json.Unmarshal(ev.Doc.Data, &fields)
	}
	fields["op"] = json.RawMessage(`"notification"`)
	fields["id"] = encode(id)
	fields["revision"] = json.RawMessage(strconv.FormatUint(ev.Revision, 10))
	return encode(fields)
}
