package triggers

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/push"
	"github.com/edgebase/edgebase/raftstore"
)

// attempt runs trigger t's action (as compiled in c) for event it once.
func (ru *run) attempt(ctx context.Context, t *trig, c *Compiled, secret string, it *item) error {
	if c == nil {
		return permanentErr(errors.New("the trigger's definition does not compile"))
	}
	a := c.Def.Action
	switch {
	case a.Webhook != nil:
		return ru.r.hooks.send(ctx, a.Webhook, secret, &it.p.Payload, it.p.Attempts+1)
	case a.Push != nil:
		return ru.push(ctx, t, c, it)
	case a.Write != nil:
		return ru.write(ctx, t, c, it)
	}
	return permanentErr(errors.New("the trigger has no action"))
}

// change is the event of it as the action's expressions see it.
func (it *item) change() *Change {
	if it.ch != nil {
		return it.ch
	}
	p := &it.p
	ch := &Change{Project: p.Project, Path: p.Path, Revision: p.Revision, Type: p.Type,
		Before: rawOrNil(p.Before), After: rawOrNil(p.After), Depth: p.Depth}
	if tm, err := time.Parse(time.RFC3339Nano, p.Time); err == nil {
		ch.Time = tm
	}
	it.ch = ch
	return ch
}

func rawOrNil(b json.RawMessage) json.RawMessage {
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	return b
}

// push queues the notification of a push action. Its id is the event's,
// so a second delivery of the event queues nothing.
func (ru *run) push(ctx context.Context, t *trig, c *Compiled, it *item) error {
	if ru.r.cfg.Push == nil {
		return permanentErr(errors.New("push is not available on this cluster"))
	}
	ch := it.change()
	msg, err := c.RenderPush(ctx, ch, it.p.Params)
	if err != nil {
		return permanentErr(err)
	}
	var target push.Target
	switch msg.To {
	case "user":
		target.UserID = msg.UserID
	case "topic":
		target.Topic = msg.Topic
	case "project":
		target.Project = true
	default:
		return permanentErr(fmt.Errorf("push to %q", msg.To))
	}
	content := push.Content{Title: msg.Title, Body: msg.Body, Data: msg.Data, Category: msg.Category}
	_, err = ru.r.cfg.Push.QueueForTrigger(ctx, t.pid, notificationID(ch.Time, it.p.ID), "trigger:"+t.name, target, content)
	if err != nil {
		// A refusal with an HTTP face below 500 (no such user, a bad
		// topic or content) will not change by retrying.
		var se interface{ Status() int }
		if errors.As(err, &se) && se.Status() < 500 {
			return permanentErr(fmt.Errorf("queue the notification: %w", err))
		}
		return fmt.Errorf("queue the notification: %w", err)
	}
	return nil
}

// notificationID is the push notification id of the event with delivery
// id id committed at commit: shaped like push's own ids (24 hex digits,
// newest first by time) and the same for every delivery of the event.
func notificationID(commit time.Time, id string) string {
	var b [12]byte
	binary.BigEndian.PutUint64(b[:8], ^uint64(commit.UnixNano()))
	h := sha256.Sum256([]byte(id))
	copy(b[8:], h[:4])
	return hex.EncodeToString(b[:])
}

// write commits a derived write with the origin marker that gives its
// changes their loop depth.
func (ru *run) write(ctx context.Context, t *trig, c *Compiled, it *item) error {
	ch := it.change()
	op, err := c.RenderWrite(ctx, ch, it.p.Params)
	if err != nil {
		return permanentErr(err)
	}
	origin, err := json.Marshal(Origin{Depth: it.p.Depth + 1, Trigger: t.name, Revision: it.p.Revision, Path: it.p.Path})
	if err != nil {
		return permanentErr(err)
	}
	res, err := ru.r.cfg.Store.Txn(ctx, &raftstore.Txn{Time: ru.r.clock.Now().UnixNano(), Ops: []raftstore.Op{
		op, {Kind: raftstore.OpPut, Path: keys.TriggerOrigin(t.pid), Data: origin}}})
	if err != nil {
		return fmt.Errorf("derived write: %w", err)
	}
	if !res.OK() {
		return permanentErr(fmt.Errorf("derived write to %s refused: %s", op.Path, res.Err))
	}
	return nil
}
