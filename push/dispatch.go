package push

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"sync"
	"time"

	"github.com/edgebase/edgebase/keys"
	"github.com/edgebase/edgebase/raftstore"
)

// errDeposed means a committed record moved under the dispatcher: another
// leader is at work, so this one stops.
var errDeposed = errors.New("push: job changed under the dispatcher (leadership moved)")

// fireBatch is how many due schedules one transaction fires.
const fireBatch = 64

// maxRunners bounds the jobs worked on at once.
const maxRunners = 16

// Run is the leader's push work: the scheduler fires due schedules and the
// dispatcher delivers queued notifications, resuming batches a previous
// leader claimed and did not mark sent. It returns when ctx ends, that is
// when this node stops leading, after its in-flight sends return.
func (s *Service) Run(ctx context.Context) {
	d := &dispatcher{s: s, running: map[string]bool{}, sem: make(chan struct{}, s.tuning.InFlight),
		wake: make(chan struct{}, 1)}
	if s.feed != nil {
		d.wg.Add(1)
		go d.watchFeed(ctx)
	}
	t := time.NewTicker(s.tuning.Poll)
	defer t.Stop()
	s.logger.Info("push dispatcher started")
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := d.fireDue(ctx)
		d.startJobs(ctx)
		// Besides the poll, wake exactly when the next schedule is due.
		if !next.IsZero() {
			timer.Reset(max(next.Sub(s.now()), time.Millisecond))
		}
		select {
		case <-ctx.Done():
			d.wg.Wait()
			s.logger.Info("push dispatcher stopped")
			return
		case <-t.C:
		case <-timer.C:
		case <-d.wake:
		}
	}
}

type dispatcher struct {
	s    *Service
	wake chan struct{}
	sem  chan struct{} // batches in flight
	wg   sync.WaitGroup

	mu      sync.Mutex
	running map[string]bool
	// noteLocks serialise the updates of one notification's counts by the
	// jobs of that notification (its main job and its deferred ones).
	noteLocks [64]sync.Mutex
}

func (d *dispatcher) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// watchFeed wakes the loop when push work is committed: a job, a due
// schedule, or a project's switch.
func (d *dispatcher) watchFeed(ctx context.Context) {
	defer d.wg.Done()
	d.s.feed.Wake(ctx, 256, func(ev raftstore.Event) bool {
		// New jobs and schedules, and project switches; not the
		// dispatcher's own claims and marks.
		created := ev.Doc != nil && ev.Doc.CreateRevision == ev.Revision
		return (created && keys.InPushQueues(ev.Path)) || keys.IsPushSettings(ev.Path)
	}, d.poke)
}

func (d *dispatcher) noteLock(nid string) *sync.Mutex {
	h := fnv.New32a()
	_, _ = h.Write([]byte(nid))
	return &d.noteLocks[h.Sum32()%uint32(len(d.noteLocks))]
}

// ---- scheduler -------------------------------------------------------------

// fireDue turns every due schedule of a project whose push is on into a
// queued notification, in one transaction per schedule: a schedule is either
// still due or fired with its job committed, never in between.
//
// It returns when the first schedule not yet due is due (zero: none).
func (d *dispatcher) fireDue(ctx context.Context) time.Time {
	now := d.s.now()
	enabled := map[string]bool{}
	var batch []*firing
	defer func() { d.commitFirings(ctx, batch, now) }()
	after := ""
	for ctx.Err() == nil {
		docs, next, err := d.s.store.List(keys.PushDueDir(), after, 256)
		if err != nil {
			d.s.logger.Warn("push scheduler: list due", "err", err)
			return time.Time{}
		}
		for _, doc := range docs {
			var e due
			if err := json.Unmarshal(doc.Data, &e); err != nil {
				d.s.logger.Error("push scheduler: bad due entry", "path", doc.Path, "err", err)
				continue
			}
			if e.SendAt > now.UnixNano() {
				return time.Unix(0, e.SendAt) // the index is in time order
			}
			on, ok := enabled[e.ProjectID]
			if !ok {
				if on, err = d.s.Enabled(e.ProjectID); err != nil {
					d.s.logger.Warn("push scheduler: project switch", "err", err)
					continue
				}
				enabled[e.ProjectID] = on
			}
			if !on {
				continue // held until the project's push is turned on
			}
			f, err := d.prepare(doc, e, now)
			if err != nil {
				d.s.logger.Warn("push scheduler: fire", "schedule", e.ScheduleID, "err", err)
				continue
			}
			if batch = append(batch, f); len(batch) == fireBatch {
				d.commitFirings(ctx, batch, now)
				batch = nil
			}
		}
		if next == "" {
			return time.Time{}
		}
		after = next
	}
	return time.Time{}
}

// firing is the transaction part that fires one due schedule.
type firing struct {
	conds []raftstore.Cond
	ops   []raftstore.Op
	log   func()        // nil for a stale entry that is only deleted
	late  time.Duration // fire time minus sendAt
}

// prepare builds the firing of one due entry: a stale entry (cancelled or
// fired schedule) is only deleted.
func (d *dispatcher) prepare(dueDoc *raftstore.Document, e due, now time.Time) (*firing, error) {
	scDoc, err := d.s.store.Get(keys.Schedule(e.ProjectID, e.ScheduleID))
	if err != nil {
		return nil, err
	}
	var sc Schedule
	if scDoc != nil {
		if err := json.Unmarshal(scDoc.Data, &sc); err != nil {
			return nil, fmt.Errorf("decode schedule: %w", err)
		}
	}
	dueCond := raftstore.Cond{Path: dueDoc.Path, Kind: raftstore.CondRevision, Revision: dueDoc.Revision}
	if scDoc == nil || sc.Status != StatusScheduled {
		return &firing{conds: []raftstore.Cond{dueCond}, ops: []raftstore.Op{{Kind: raftstore.OpDelete, Path: dueDoc.Path}}}, nil
	}
	targets, err := d.s.checkTarget(e.ProjectID, sc.Target)
	if err != nil {
		targets = 0 // e.g. the user is gone: the job finds nobody
	}
	note := &Notification{ID: newID(now), ProjectID: e.ProjectID, Content: sc.Content, Target: sc.Target, Status: StatusQueued,
		CreatedAt: formatTime(now), CreatedBy: sc.CreatedBy, ScheduleID: sc.ID, Targets: targets}
	sc.Status, sc.FiredAt, sc.NotificationID = StatusSent, formatTime(now), note.ID
	j := job{ID: newFIFOID(now), ProjectID: e.ProjectID, NID: note.ID, Target: sc.Target}
	return &firing{
		conds: []raftstore.Cond{{Path: scDoc.Path, Kind: raftstore.CondRevision, Revision: scDoc.Revision}, dueCond},
		ops: []raftstore.Op{
			{Kind: raftstore.OpDelete, Path: dueDoc.Path},
			{Kind: raftstore.OpPut, Path: scDoc.Path, Data: mustJSON(sc)},
			{Kind: raftstore.OpPut, Path: keys.Notification(e.ProjectID, note.ID), Data: mustJSON(note)},
			{Kind: raftstore.OpPut, Path: keys.PushJob(j.ID), Data: mustJSON(j)},
		},
		log: func() {
			d.s.logger.Info("push schedule fired", "schedule", sc.ID, "notification", note.ID,
				"late_ms", now.Sub(time.Unix(0, e.SendAt)).Milliseconds())
		},
		late: now.Sub(time.Unix(0, e.SendAt)),
	}, nil
}

// commitFirings fires schedules due together in one transaction; if one of
// them moved meanwhile (a cancel won the race), each is tried alone.
func (d *dispatcher) commitFirings(ctx context.Context, fs []*firing, now time.Time) {
	if len(fs) == 0 {
		return
	}
	t := &raftstore.Txn{Time: now.UnixNano()}
	for _, f := range fs {
		t.Conds = append(t.Conds, f.conds...)
		t.Ops = append(t.Ops, f.ops...)
	}
	res, err := d.s.store.Txn(ctx, t)
	if err != nil {
		if ctx.Err() == nil {
			d.s.logger.Warn("push scheduler: fire", "err", err)
		}
		return
	}
	if res.OK() {
		for _, f := range fs {
			if f.log != nil {
				f.log()
				d.s.metrics.fired(f.late)
			}
		}
		return
	}
	if len(fs) == 1 {
		return // it moved: the next pass judges it again
	}
	for _, f := range fs {
		d.commitFirings(ctx, []*firing{f}, now)
	}
}

// ---- dispatcher --------------------------------------------------------------

// startJobs starts a runner for every due job of an enabled project that has
// none.
func (d *dispatcher) startJobs(ctx context.Context) {
	now := d.s.now().UnixNano()
	enabled := map[string]bool{}
	after := ""
	for ctx.Err() == nil {
		docs, next, err := d.s.store.List(keys.PushJobsDir(), after, 256)
		if err != nil {
			d.s.logger.Warn("push dispatcher: list jobs", "err", err)
			return
		}
		for _, doc := range docs {
			id := keys.Base(doc.Path)
			if due, ok := idTime(id); ok && due > now {
				return // jobs are keyed by due time: the rest are later
			}
			d.mu.Lock()
			busy, full := d.running[id], len(d.running) >= maxRunners
			d.mu.Unlock()
			if full {
				return
			}
			if busy {
				continue
			}
			var j job
			if err := json.Unmarshal(doc.Data, &j); err != nil {
				d.s.logger.Error("push dispatcher: bad job", "path", doc.Path, "err", err)
				continue
			}
			if j.DueAt > now {
				continue
			}
			on, ok := enabled[j.ProjectID]
			if !ok {
				if on, err = d.s.Enabled(j.ProjectID); err != nil {
					continue
				}
				enabled[j.ProjectID] = on
			}
			if !on {
				continue
			}
			d.mu.Lock()
			if d.running[j.ID] || len(d.running) >= maxRunners {
				d.mu.Unlock()
				continue
			}
			d.running[j.ID] = true
			d.mu.Unlock()
			// The listing may predate the last writes of a runner that has
			// just ended: start from the job as it is now, or a batch it
			// marked sent would be sent again.
			cur, err := d.s.store.Get(doc.Path)
			if err == nil && cur != nil {
				err = json.Unmarshal(cur.Data, &j)
			}
			if err != nil || cur == nil {
				d.mu.Lock()
				delete(d.running, j.ID)
				d.mu.Unlock()
				continue
			}
			r := &runner{d: d, j: j, rev: cur.Revision, jid: j.ID, pid: j.ProjectID, nid: j.NID, aud: j.Target}
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				err := r.run(ctx)
				if err != nil && ctx.Err() == nil {
					d.s.logger.Warn("push job stopped", "job", j.ID, "notification", j.NID, "err", err)
				}
				d.mu.Lock()
				delete(d.running, j.ID)
				d.mu.Unlock()
				d.poke()
			}()
		}
		if next == "" {
			return
		}
		after = next
	}
}

// runner works one job: it claims batches in order (a committed record
// before sending), sends several at once, and marks each sent.
type runner struct {
	d *dispatcher

	// The job's fixed fields, read without the lock.
	jid, pid, nid string
	aud           Target

	mu       sync.Mutex // guards j and rev: every write of the job record
	j        job
	rev      uint64
	content  Content
	created  string
	target   Target // the notification's audience, as its recipients see it
	creds    []byte
	credsRev uint64
	failed   error
}

// recipient is one user of a batch and the devices to send to.
type recipient struct {
	uid     string
	devices []Device
}

type batch struct {
	f          flight
	recipients []recipient
}

func (r *runner) run(ctx context.Context) error {
	s := r.d.s
	pid := r.pid
	nd, err := s.store.Get(keys.Notification(pid, r.nid))
	if err != nil {
		return err
	}
	if nd == nil {
		// The notification is gone: nothing to deliver.
		_, err := s.store.Txn(ctx, &raftstore.Txn{Time: s.now().UnixNano(),
			Conds: []raftstore.Cond{{Path: keys.PushJob(r.jid), Kind: raftstore.CondRevision, Revision: r.rev}},
			Ops:   []raftstore.Op{{Kind: raftstore.OpDelete, Path: keys.PushJob(r.jid)}}})
		return err
	}
	var note Notification
	if err := json.Unmarshal(nd.Data, &note); err != nil {
		return fmt.Errorf("decode notification: %w", err)
	}
	r.content, r.created, r.target = note.Content, note.CreatedAt, note.Target
	if r.creds, r.credsRev, err = s.openCredentials(pid); err != nil {
		s.logger.Warn("push: FCM credentials unusable", "project", pid, "err", err)
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	send := func(b *batch) {
		defer wg.Done()
		defer func() { <-r.d.sem }()
		if err := r.deliver(ctx, b); err != nil {
			r.mu.Lock()
			if r.failed == nil {
				r.failed = err
			}
			r.mu.Unlock()
		}
	}
	// First the batches a previous leader (or runner) claimed and did not
	// mark. Take the job over with a commit before resending them: it
	// proves this node still leads with a quorum (a closing or deposed
	// leader fails here instead of sending them once more) and fences out
	// the runner that claimed them.
	if len(r.j.Inflight) > 0 {
		r.mu.Lock()
		err := r.writeJob(ctx, r.j, nil)
		r.mu.Unlock()
		if err != nil {
			return err
		}
	}
	for _, f := range append([]flight(nil), r.j.Inflight...) {
		b, err := r.reload(f)
		if err != nil {
			return err
		}
		select {
		case r.d.sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		wg.Add(1)
		go send(b)
	}
	for {
		r.mu.Lock()
		done, failed := r.j.Exhausted, r.failed
		r.mu.Unlock()
		if failed != nil {
			return failed
		}
		if done {
			break
		}
		on, err := s.Enabled(pid)
		if err != nil {
			return err
		}
		if !on {
			return nil // held; picked up again when push is turned on
		}
		select {
		case r.d.sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		b, err := r.claim(ctx)
		if err != nil {
			<-r.d.sem
			return err
		}
		if b == nil {
			<-r.d.sem
			continue
		}
		wg.Add(1)
		go send(b)
	}
	wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed != nil {
		return r.failed
	}
	if len(r.j.Inflight) == 0 {
		// Every batch is marked: the last mark may have finished the job
		// already; if the job ran out of users with nothing in flight, end it.
		if d, err := s.store.Get(keys.PushJob(r.jid)); err == nil && d != nil && d.Revision == r.rev {
			return r.finish(ctx)
		}
	}
	return nil
}

// usersAfter lists up to limit user ids of the target after cursor, in order.
func (r *runner) usersAfter(cursor string, limit int) ([]string, bool, error) {
	s, pid, t := r.d.s, r.pid, r.aud
	var dir string
	switch {
	case t.Project:
		dir = keys.UsersDir(pid)
	case t.Topic != "":
		dir = keys.TopicDir(pid, t.Topic)
	case t.UserID != "":
		if cursor == "" || cursor < t.UserID {
			return []string{t.UserID}, true, nil
		}
		return nil, true, nil
	default:
		users := append([]string(nil), t.Users...)
		sort.Strings(users)
		i := sort.SearchStrings(users, cursor)
		for i < len(users) && users[i] <= cursor {
			i++
		}
		rest := users[i:]
		if len(rest) > limit {
			return rest[:limit], false, nil
		}
		return rest, true, nil
	}
	docs, next, err := s.store.List(dir, cursor, limit)
	if err != nil {
		return nil, false, err
	}
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = keys.Base(d.Path)
	}
	return out, next == "", nil
}

func (r *runner) devices(uid string) ([]Device, error) {
	docs, _, err := r.d.s.store.List(keys.DevicesDir(r.pid, uid), "", MaxDevicesByUser)
	if err != nil {
		return nil, err
	}
	out := make([]Device, 0, len(docs))
	for _, d := range docs {
		var dev Device
		if json.Unmarshal(d.Data, &dev) == nil && dev.Token != "" {
			out = append(out, dev)
		}
	}
	return out, nil
}

func (r *runner) prefs(uid string) (Prefs, error) {
	d, err := r.d.s.store.Get(keys.Prefs(r.pid, uid))
	if err != nil {
		return Prefs{}, err
	}
	p := DefaultPrefs()
	if d != nil {
		p = decodePrefs(d.Data)
	}
	p.loc = r.d.s.zone(p.Timezone)
	return p, nil
}

// claim takes the next batch of users, judges each one's preferences, and
// commits the claim (with the users' inbox entries, which are also the
// socket channel, and deferred jobs for those in quiet hours) before any
// device is sent to. It returns nil when there was nothing to claim.
func (r *runner) claim(ctx context.Context) (*batch, error) {
	s := r.d.s
	r.mu.Lock()
	defer r.mu.Unlock()
	now := s.now()
	limit := s.tuning.BatchSize
	users, last, err := r.usersAfter(r.j.Cursor, limit)
	if err != nil {
		return nil, err
	}
	b := &batch{f: flight{ID: r.j.NextBatch, After: r.j.Cursor, ClaimedAt: now.UnixNano()}}
	var ops []raftstore.Op
	deferred := map[int64][]string{}
	ndev := 0
	taken := 0
	for _, uid := range users {
		p, err := r.prefs(uid)
		if err != nil {
			return nil, err
		}
		dec, until := p.decide(r.content.Category, now)
		var devs []Device
		if dec == deliver {
			if devs, err = r.devices(uid); err != nil {
				return nil, err
			}
		}
		// A batch is one SendEach (at most 500 messages) and its mark must
		// fit one transaction: never split a user, never overfill.
		if taken > 0 && ndev+len(devs) > limit {
			break
		}
		taken++
		b.f.Last = uid
		switch dec {
		case skip:
			b.f.Skipped++
		case defer_:
			deferred[until.UnixNano()] = append(deferred[until.UnixNano()], uid)
			b.f.Deferred++
		default:
			ndev += len(devs)
			b.recipients = append(b.recipients, recipient{uid: uid, devices: devs})
			ops = append(ops, raftstore.Op{Kind: raftstore.OpPut, Path: keys.Inbox(r.pid, uid, r.nid),
				Data: mustJSON(r.inboxEntry(len(devs), now))})
		}
	}
	if taken < len(users) {
		last = false
	}
	for _, at := range sortedKeys(deferred) {
		dj := job{ID: newFIFOID(time.Unix(0, at)), ProjectID: r.pid, NID: r.nid, Target: Target{Users: deferred[at]}, DueAt: at}
		ops = append(ops, raftstore.Op{Kind: raftstore.OpPut, Path: keys.PushJob(dj.ID), Data: mustJSON(dj)})
	}
	next := r.j
	next.Inflight = append([]flight(nil), r.j.Inflight...)
	next.Exhausted = last
	if taken == 0 {
		if len(next.Inflight) == 0 {
			r.j.Exhausted = true
			return nil, r.finish(ctx)
		}
		if err := r.writeJob(ctx, next, nil); err != nil {
			return nil, err
		}
		return nil, nil
	}
	next.Cursor = b.f.Last
	next.NextBatch++
	next.Inflight = append(next.Inflight, b.f)
	if err := r.writeJob(ctx, next, ops); err != nil {
		return nil, err
	}
	return b, nil
}

func sortedKeys(m map[int64][]string) []int64 {
	out := make([]int64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (r *runner) inboxEntry(devices int, now time.Time) InboxEntry {
	return InboxEntry{ID: r.nid, Title: r.content.Title, Body: r.content.Body, Data: r.content.Data,
		Category: r.content.Category, Target: r.target, Status: StatusDelivered,
		CreatedAt: r.created, SentAt: formatTime(now), Devices: devices}
}

// writeJob commits the job record (and ops) on the condition that it is as
// this runner last wrote it. Callers hold r.mu.
func (r *runner) writeJob(ctx context.Context, next job, ops []raftstore.Op) error {
	s := r.d.s
	res, err := s.store.Txn(ctx, &raftstore.Txn{Time: s.now().UnixNano(),
		Conds: []raftstore.Cond{{Path: keys.PushJob(r.jid), Kind: raftstore.CondRevision, Revision: r.rev}},
		Ops:   append([]raftstore.Op{{Kind: raftstore.OpPut, Path: keys.PushJob(r.jid), Data: mustJSON(next)}}, ops...)})
	if err != nil {
		return err
	}
	if !res.OK() {
		if res.Err == raftstore.ErrCodeCondFailed {
			return errDeposed
		}
		return fmt.Errorf("push: claim refused: %s", res.Err)
	}
	r.j, r.rev = next, res.Revision
	return nil
}

// reload rebuilds a batch a previous leader claimed: the same users, judged
// at the claim's time, so that the users it deferred stay deferred.
func (r *runner) reload(f flight) (*batch, error) {
	b := &batch{f: f}
	cursor := f.After
	at := time.Unix(0, f.ClaimedAt)
	for {
		users, last, err := r.usersAfter(cursor, r.d.s.tuning.BatchSize)
		if err != nil {
			return nil, err
		}
		for _, uid := range users {
			if uid > f.Last {
				return b, nil
			}
			p, err := r.prefs(uid)
			if err != nil {
				return nil, err
			}
			if dec, _ := p.decide(r.content.Category, at); dec == deliver {
				devs, err := r.devices(uid)
				if err != nil {
					return nil, err
				}
				b.recipients = append(b.recipients, recipient{uid: uid, devices: devs})
			}
			cursor = uid
		}
		if last || len(users) == 0 {
			return b, nil
		}
	}
}

// deliver sends a claimed batch and marks it sent with its outcomes.
func (r *runner) deliver(ctx context.Context, b *batch) error {
	s := r.d.s
	var msgs []Message
	var owners []string
	for _, rc := range b.recipients {
		for _, dev := range rc.devices {
			msgs = append(msgs, Message{Token: dev.Token, Title: r.content.Title, Body: r.content.Body, Data: r.content.Data})
			owners = append(owners, rc.uid)
		}
	}
	var results []Result
	if len(msgs) > 0 {
		if s.sender == nil {
			results = make([]Result, len(msgs))
			for i := range results {
				results[i] = Result{Outcome: Failed, Err: "no FCM sender is configured on this server"}
			}
		} else {
			var err error
			results, err = s.sender.Send(ctx, r.pid, r.creds, r.credsRev, msgs)
			if err != nil {
				return err // outcome unknown: the claim stays for the next leader
			}
		}
	}
	c := counts{skipped: b.f.Skipped, deferred: b.f.Deferred}
	var prune []raftstore.Op
	for i, res := range results {
		switch res.Outcome {
		case Delivered:
			c.delivered++
		case Gone:
			c.pruned++
			th := keys.DeviceTokenHash(msgs[i].Token)
			prune = append(prune, raftstore.Op{Kind: raftstore.OpDelete, Path: keys.Device(r.pid, owners[i], th), IfExists: true})
			if od, err := s.store.Get(keys.DeviceToken(r.pid, th)); err == nil && od != nil {
				var o tokenOwner
				if json.Unmarshal(od.Data, &o) == nil && o.UserID == owners[i] {
					prune = append(prune, raftstore.Op{Kind: raftstore.OpDelete, Path: od.Path, IfExists: true})
				}
			}
		default:
			c.failed++
			c.lastErr = res.Err
		}
	}
	return r.mark(ctx, b.f.ID, c, prune)
}

type counts struct {
	delivered, failed, pruned, skipped, deferred int
	lastErr                                      string
}

// mark removes a batch from the in-flight list and adds its outcomes to the
// notification, in one transaction; the last mark of an exhausted job ends it.
func (r *runner) mark(ctx context.Context, id int, c counts, prune []raftstore.Op) error {
	s := r.d.s
	lock := r.d.noteLock(r.nid)
	lock.Lock()
	defer lock.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		next := r.j
		next.Inflight = nil
		for _, f := range r.j.Inflight {
			if f.ID != id {
				next.Inflight = append(next.Inflight, f)
			}
		}
		final := next.Exhausted && len(next.Inflight) == 0
		noteOps, noteCond, err := r.noteUpdate(c, final)
		if err != nil {
			return err
		}
		jobOp := raftstore.Op{Kind: raftstore.OpPut, Path: keys.PushJob(r.jid), Data: mustJSON(next)}
		if final {
			jobOp = raftstore.Op{Kind: raftstore.OpDelete, Path: keys.PushJob(r.jid)}
		}
		txn := &raftstore.Txn{Time: s.now().UnixNano(),
			Conds: []raftstore.Cond{{Path: keys.PushJob(r.jid), Kind: raftstore.CondRevision, Revision: r.rev, Name: condJob}, noteCond},
			Ops:   append(append([]raftstore.Op{jobOp}, noteOps...), prune...)}
		res, err := s.store.Txn(ctx, txn)
		if err != nil {
			return err
		}
		if res.OK() {
			r.j, r.rev = next, res.Revision
			s.metrics.marked(c)
			return nil
		}
		if res.Failed(txn) != condNote {
			return errDeposed
		}
		// The notification moved (a deferred job of it marked a batch on
		// another path): read it again.
	}
}

// The conditions of a job's txn: when the job's fails, another leader (or a
// later run of this one) owns it (errDeposed); when the notification's
// fails, the notification moved (a deferred job of it counted a batch) and
// is read again.
const (
	condJob  = "job"
	condNote = "note"
)

// finish ends a job that has nothing in flight and nobody left. Callers
// hold r.mu.
func (r *runner) finish(ctx context.Context) error {
	s := r.d.s
	for {
		noteOps, noteCond, err := r.noteUpdate(counts{}, true)
		if err != nil {
			return err
		}
		txn := &raftstore.Txn{Time: s.now().UnixNano(),
			Conds: []raftstore.Cond{{Path: keys.PushJob(r.jid), Kind: raftstore.CondRevision, Revision: r.rev, Name: condJob}, noteCond},
			Ops:   append([]raftstore.Op{{Kind: raftstore.OpDelete, Path: keys.PushJob(r.jid)}}, noteOps...)}
		res, err := s.store.Txn(ctx, txn)
		if err != nil {
			return err
		}
		if res.OK() {
			r.rev = res.Revision
			return nil
		}
		if res.Failed(txn) != condNote {
			return errDeposed
		}
	}
}

// noteUpdate adds c to the notification's counts; final marks it sent when
// this is its main job (deferred jobs only add counts).
func (r *runner) noteUpdate(c counts, final bool) ([]raftstore.Op, raftstore.Cond, error) {
	path := keys.Notification(r.pid, r.nid)
	d, err := r.d.s.store.Get(path)
	if err != nil {
		return nil, raftstore.Cond{}, err
	}
	if d == nil {
		return nil, raftstore.Cond{Path: path, Kind: raftstore.CondNotExists, Name: condNote}, nil
	}
	var n Notification
	if err := json.Unmarshal(d.Data, &n); err != nil {
		return nil, raftstore.Cond{}, fmt.Errorf("decode notification: %w", err)
	}
	n.Delivered += c.delivered
	n.Failed += c.failed
	n.Pruned += c.pruned
	n.Skipped += c.skipped
	n.Deferred += c.deferred
	if c.lastErr != "" {
		n.LastError = c.lastErr
	}
	if len(r.aud.Users) == 0 {
		if final {
			n.Status = StatusSent
			n.SentAt = formatTime(r.d.s.now())
		} else if n.Status == StatusQueued {
			n.Status = StatusSending
		}
	}
	return []raftstore.Op{{Kind: raftstore.OpPut, Path: path, Data: mustJSON(n)}},
		raftstore.Cond{Path: path, Kind: raftstore.CondRevision, Revision: d.Revision, Name: condNote}, nil
}
