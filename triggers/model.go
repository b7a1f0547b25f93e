package triggers

import (
	"encoding/json"
)

// Limits of a definition.
const (
	// MaxTriggers bounds the triggers of one project.
	MaxTriggers = 100
	// MaxNameLen bounds a trigger's name ([A-Za-z0-9][A-Za-z0-9_-]*).
	MaxNameLen = 64
	// DefaultMaxDepth is the loop limit: a change made by a trigger's
	// derived write at depth DefaultMaxDepth fires no trigger. A change
	// made by an app is depth 0; a derived write made for a change of depth
	// d commits changes of depth d+1.
	DefaultMaxDepth = 3
)

// Event types a trigger can be declared "on".
const (
	TypeCreate = "create"
	TypeUpdate = "update"
	TypeDelete = "delete"
)

// Definition is a trigger as the owner declares it (PUT /api/triggers/{name})
// and as it is stored at keys.Trigger. Unknown members are refused.
type Definition struct {
	// Name is the trigger's name (from the URL; stored for listing).
	Name string `json:"name"`
	// Match is a document path pattern as the access rules spell them:
	// literal segments, {name} (one segment), ** or {name=**} last.
	Match string `json:"match"`
	// On lists the event types that fire the trigger (default: all three).
	On []string `json:"on,omitempty"`
	// Condition is an optional CEL expression over the event (Env below)
	// that must be true for the trigger to fire.
	Condition string `json:"condition,omitempty"`
	// Action is exactly one of webhook, push, write.
	Action Action `json:"action"`
	// Disabled stops deliveries; the cursor stays where it is and events
	// committed meanwhile are delivered when the trigger is enabled again
	// (while the change log holds them).
	Disabled bool `json:"disabled,omitempty"`
	// CreatedAt and UpdatedAt are RFC 3339 (set by the service).
	CreatedAt string `json:"createdAt,omitempty"`
	UpdatedAt string `json:"updatedAt,omitempty"`
}

// Action is what a trigger does; exactly one member is set.
type Action struct {
	Webhook *Webhook     `json:"webhook,omitempty"`
	Push    *PushAction  `json:"push,omitempty"`
	Write   *WriteAction `json:"write,omitempty"`
}

// Webhook POSTs the event (Payload) to URL, signed with Secret.
type Webhook struct {
	URL string `json:"url"`
	// Secret signs deliveries (Edgebase-Signature). Optional on PUT: one is
	// made ("whsec_" + 32 random bytes, base64url) and answered once. It is
	// never answered again: GET shows SecretHint.
	Secret string `json:"secret,omitempty"`
	// SecretHint is the secret's last 4 characters (answers only).
	SecretHint string `json:"secretHint,omitempty"`
	// Headers are extra request headers (not Content-Type, not the
	// signature's, not hop-by-hop ones).
	Headers map[string]string `json:"headers,omitempty"`
}

// PushAction sends a notification through the push pipeline (preferences,
// quiet hours, the project's push switch all apply).
type PushAction struct {
	// To is "user", "topic" or "project".
	To string `json:"to"`
	// UserIDFrom is a CEL expression (Env) giving the user id (to: user).
	UserIDFrom string `json:"userIdFrom,omitempty"`
	// Topic is a template giving the topic (to: topic).
	Topic string `json:"topic,omitempty"`
	// Title, Body and Data's values are templates.
	Title    string            `json:"title"`
	Body     string            `json:"body"`
	Data     map[string]string `json:"data,omitempty"`
	Category string            `json:"category,omitempty"`
}

// WriteAction is a derived write, with the members of one write of
// POST /api/db/batch: op is set, update, delete, deleteField, increment,
// serverTimestamp, arrayUnion or arrayRemove. Collection is a template (the
// document's path); for set, Data's string values are templates (a value
// that is exactly one {{expr}} takes the expression's JSON value); Value
// (update) likewise.
type WriteAction struct {
	Op         string          `json:"op"`
	Collection string          `json:"collection"`
	Data       json.RawMessage `json:"data,omitempty"`
	OldKey     string          `json:"oldKey,omitempty"`
	NewKey     string          `json:"newKey,omitempty"`
	Value      json.RawMessage `json:"value,omitempty"`
	Type       string          `json:"type,omitempty"`
	Field      string          `json:"field,omitempty"`
	By         json.RawMessage `json:"by,omitempty"`
	Values     json.RawMessage `json:"values,omitempty"`
}

// Payload is the body of a webhook delivery, and what a parked event or a
// dead letter keeps of its event.
type Payload struct {
	// ID is the delivery's idempotency key: trigger:revision:path (path
	// escaped as url.PathEscape), also sent as Idempotency-Key.
	ID       string            `json:"id"`
	Trigger  string            `json:"trigger"`
	Project  string            `json:"project"`
	Revision uint64            `json:"revision"`
	Path     string            `json:"path"` // the project-relative document path
	Type     string            `json:"type"` // create, update, delete
	Before   json.RawMessage   `json:"before"`
	After    json.RawMessage   `json:"after"`
	Params   map[string]string `json:"params,omitempty"`
	// Time is the commit's time (the proposer's clock in the entry), RFC
	// 3339 with nanoseconds, UTC.
	Time string `json:"time"`
}

// Parked is an event waiting at keys.TriggerQueueDir for a retry (or behind
// one on its path). Stored as JSON.
type Parked struct {
	Payload
	// Depth is the loop depth of the change (see DefaultMaxDepth).
	Depth int `json:"depth,omitempty"`
	// Attempts made so far; FirstAttemptAt bounds the retries (RetryFor).
	Attempts       int    `json:"attempts"`
	FirstAttemptAt int64  `json:"firstAttemptAt,omitempty"` // Unix nanos
	NextAttemptAt  int64  `json:"nextAttemptAt,omitempty"`  // Unix nanos
	LastError      string `json:"lastError,omitempty"`
}

// Dead is a dead letter at keys.TriggerDeadDir. Stored as JSON.
type Dead struct {
	Parked
	DeadAt string `json:"deadAt"` // RFC 3339
}

// State is a trigger's committed progress at keys.TriggerState, written by
// the leader's runner. A trigger without one (just created) starts after
// the revision that created its definition.
type State struct {
	// DefRevision is the CreateRevision of the definition this state is
	// for: a state left by a deleted trigger of the same name is ignored.
	DefRevision uint64 `json:"defRevision"`
	// Cursor: every matching change with a revision <= Cursor has been
	// delivered, parked, or dead-lettered.
	Cursor        uint64 `json:"cursor"`
	Delivered     uint64 `json:"delivered"`
	Failed        uint64 `json:"failed"` // failed attempts
	Dead          uint64 `json:"dead"`
	LoopStops     uint64 `json:"loopStops,omitempty"`
	LastError     string `json:"lastError,omitempty"`
	LastErrorAt   string `json:"lastErrorAt,omitempty"`
	LastSuccessAt string `json:"lastSuccessAt,omitempty"`
}

// Status is what an owner reads of a trigger's delivery (GET answers).
type Status struct {
	Cursor        uint64 `json:"cursor"`
	LagRevisions  uint64 `json:"lagRevisions"` // applied revision - cursor
	Pending       int    `json:"pending"`      // parked events
	DeadLetters   int    `json:"deadLetters"`
	Delivered     uint64 `json:"delivered"`
	Failed        uint64 `json:"failed"`
	Dead          uint64 `json:"dead"`
	LoopStops     uint64 `json:"loopStops"`
	LastError     string `json:"lastError,omitempty"`
	LastErrorAt   string `json:"lastErrorAt,omitempty"`
	LastSuccessAt string `json:"lastSuccessAt,omitempty"`
}

// Origin is the marker (keys.TriggerOrigin) a derived write commits in its
// own entry.
type Origin struct {
	Depth    int    `json:"depth"`
	Trigger  string `json:"trigger"`
	Revision uint64 `json:"revision"` // the change the write was made for
	Path     string `json:"path"`
}
