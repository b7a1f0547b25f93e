package raftstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dgraph-io/badger/v4"

	"github.com/edgebase/edgebase/query"
)

// The query executor: one query against one consistent view of this node's
// tree. It picks a plan (a ready declared index that serves the query, the
// automatic single-field index, or a scan of the collection), then fills a
// page with the documents that match and that the caller may read. See
// package query for the order, the filters and the cursors.

// DefaultQueryScanLimit is how many documents a query examines without a
// usable index before it is refused (--query-scan-limit).
const DefaultQueryScanLimit = 10000

// queryCtxEvery is how many documents a query examines between two looks at
// its context.
const queryCtxEvery = 256

// QueryRequest is one query of a project.
type QueryRequest struct {
	ProjectID string
	Query     *query.Compiled // its Collection is relative to the project
	// ScanLimit bounds the documents examined without a usable index (the
	// query is then refused) and, with an index, per call (the page is then
	// returned short, with a cursor). 0: DefaultQueryScanLimit.
	ScanLimit int
	// Allow is the caller's read rule per document; nil allows all. A
	// document it refuses is skipped, never returned nor counted.
	Allow func(d *Document) bool
}

// QueryResult is one page of a query, or its count.
type QueryResult struct {
	Documents  []*Document // in query order; nil for a count
	Count      int         // with Query.Q.Count
	NextCursor string      // "" when the results are complete
	Plan       string      // "index:<id>", "auto:<field>" or "scan" (tests, logs, metrics)
	Revision   uint64      // the applied index the whole result reflects
}

// IndexRequiredError means the query has no usable index and would examine
// more than ScanLimit documents. Index is the index that would serve it;
// Building is true when such an index is declared but still building on
// this node.
type IndexRequiredError struct {
	Index     query.Index
	Building  bool
	ScanLimit int
}

func (e *IndexRequiredError) Error() string {
	if len(e.Index.Fields) == 0 {
		// No index serves a query without an equality or an order, or
		// with more of them than an index holds.
		return fmt.Sprintf("the query would examine more than %d documents and no index can serve it (an index needs an == filter or an order, and holds at most %d fields)", e.ScanLimit, query.MaxIndexFields)
	}
	def, err := json.Marshal(e.Index)
	if err != nil {
		def = []byte(fmt.Sprintf("%+v", e.Index))
	}
	if e.Building {
		return fmt.Sprintf("the query would examine more than %d documents and its index %s is still building on this node; retry once it is ready", e.ScanLimit, def)
	}
	return fmt.Sprintf("the query would examine more than %d documents without an index; declare the index %s", e.ScanLimit, def)
}

// errIndexEntryDangling reports an index entry whose document is missing:
// the index and the documents are written in one transaction, so this is a
// broken tree, not a race.
var errIndexEntryDangling = errors.New("index entry names a missing document")

// Query runs a query on this node's applied state, read in one Badger
// transaction: the documents, the index entries and the reported Revision
// are one moment. The caller waits for the consistency it needs first
// (WaitRead), as for Get.
func (s *Store) Query(ctx context.Context, req QueryRequest) (*QueryResult, error) {
	if req.Query == nil {
		return nil, errors.New("query: no query")
	}
	if req.ProjectID == "" || strings.Contains(req.ProjectID, "/") {
		return nil, fmt.Errorf("query: bad project id %q", req.ProjectID)
	}
	after, err := req.Query.After()
	if err != nil {
		return nil, err
	}
	db, release, err := s.fsm.pin()
	if err != nil {
		return nil, err
	}
	defer release()
	txn := db.NewTransaction(false)
	defer txn.Discard()
	rev, _, err := readUint64(txn, keyApplied)
	if err != nil {
		return nil, fmt.Errorf("query: read applied index: %w", err)
	}
	q := &req.Query.Q
	x := &queryRun{
		ctx:       ctx,
		txn:       txn,
		c:         req.Query,
		pid:       req.ProjectID,
		parent:    req.ProjectID + "/" + q.Collection,
		after:     after,
		limit:     q.Limit,
		scanLimit: req.ScanLimit,
		count:     q.Count,
		allow:     req.Allow,
	}
	if x.limit <= 0 {
		x.limit = query.DefaultLimit
	}
	if x.scanLimit <= 0 {
		x.scanLimit = DefaultQueryScanLimit
	}
	res, err := x.run(s.fsm)
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", q.Collection, err)
	}
	res.Revision = rev
	s.logger.Debug("query", "project", req.ProjectID, "collection", q.Collection, "group", q.CollectionGroup,
		"plan", res.Plan, "documents", len(res.Documents), "count", res.Count, "more", res.NextCursor != "")
	return res, nil
}

// queryRun is one execution of a query inside one read transaction.
type queryRun struct {
	ctx       context.Context
	txn       *badger.Txn
	c         *query.Compiled
	pid       string
	parent    string // the full path of the collection (collection scope)
	after     []byte // the cursor's SortKey; nil: from the start
	limit     int
	scanLimit int
	count     bool
	allow     func(*Document) bool
}

// run picks the plan: (1) a ready declared index that serves the query,
// (2) the automatic index of an equality on a top-level field, (3) a scan.
func (x *queryRun) run(f *fsm) (*QueryResult, error) {
	defs, err := f.indexDefs(x.txn, x.pid)
	if err != nil {
		return nil, fmt.Errorf("read index definitions: %w", err)
	}
	building := false
	for _, d := range defs {
		eq, reverse, ok := d.Index.Serves(x.c)
		if !ok {
			continue
		}
		if d.State != IndexReady {
			building = true
			continue
		}
		return x.stream("index:"+d.ID, x.declaredRange(d, eq, reverse))
	}
	if !x.c.Q.CollectionGroup && autoReady(x.txn) {
		if field, prefix, ok := x.pickAuto(); ok {
			plan := "auto:" + field
			if x.pathOrder() {
				// The entries of one value are in path order, which is
				// then the query's order: stream them.
				return x.stream(plan, keyRange{prefix: prefix, exact: len(x.c.Q.Where) == 1})
			}
			// Counting needs no order: every entry of the value is
			// counted, as through a declared index.
			return x.collect(plan, !x.count, building, func(fn func(string, []byte) error) error {
				return x.eachEntry(prefix, fn)
			})
		}
	}
	if x.c.Q.CollectionGroup {
		return x.collect("scan", true, building, func(fn func(string, []byte) error) error {
			return x.eachInGroup(fn)
		})
	}
	return x.collect("scan", true, building, func(fn func(string, []byte) error) error {
		return x.eachChild(fn)
	})
}

// pathOrder reports whether the query's order is the path ascending: no
// order but by fields an equality fixes, and no range.
func (x *queryRun) pathOrder() bool {
	if _, _, _, _, _, hasRange := x.c.Range(); hasRange {
		return false
	}
	eqs := x.c.Equalities()
	for _, o := range x.c.Q.OrderBy {
		if _, pinned := eqs[o.Field]; !pinned {
			return false
		}
	}
	return true
}

func (x *queryRun) indexRequired(building bool) error {
	return &IndexRequiredError{Index: query.Suggest(x.c), Building: building, ScanLimit: x.scanLimit}
}

func (x *queryRun) allowed(d *Document) bool { return x.allow == nil || x.allow(d) }

func (x *queryRun) checkCtx(n int) error {
	if n%queryCtxEvery == 0 {
		return x.ctx.Err()
	}
	return nil
}

// keyRange is a range of index keys whose tails (what follows prefix) are
// the query's SortKeys, complemented when reverse (the index orders every
// field the other way, and is then iterated backwards). lo and hi bound the
// tail in stored (ascending key) order: a tail that starts with the bound's
// bytes holds the bound's value (the encoding is prefix-free).
type keyRange struct {
	prefix       []byte
	reverse      bool
	lo, hi       []byte // nil: open
	loInc, hiInc bool
	// exact: every entry of the range matches (the query's filters are
	// the prefix's equalities and the bounds' range, and an entry exists
	// only for a document with every index field), so Match is not needed
	// and a count without a rule needs no document.
	exact bool
}

// belowLo and aboveHi compare a tail's first value with the bounds.
func (r *keyRange) belowLo(tail []byte) bool {
	if r.lo == nil {
		return false
	}
	if bytes.HasPrefix(tail, r.lo) {
		return !r.loInc
	}
	return bytes.Compare(tail, r.lo) < 0
}

func (r *keyRange) aboveHi(tail []byte) bool {
	if r.hi == nil {
		return false
	}
	if bytes.HasPrefix(tail, r.hi) {
		return !r.hiInc
	}
	return bytes.Compare(tail, r.hi) > 0
}

// start is where the scan seeks: the first key of the range in its
// direction, or the cursor's key when that is further on.
func (r *keyRange) start(cur []byte) []byte {
	cat := func(b []byte) []byte { return append(slices.Clip(r.prefix), b...) }
	if !r.reverse {
		k := r.prefix
		if r.lo != nil {
			k = cat(r.lo)
			if !r.loInc {
				k = keySuccessor(k)
			}
		}
		if cur != nil {
			if c := cat(cur); bytes.Compare(c, k) > 0 {
				k = c
			}
		}
		return k
	}
	k := keySuccessor(r.prefix)
	if r.hi != nil {
		k = cat(r.hi)
		if r.hiInc {
			k = keySuccessor(k)
		}
	}
	if cur != nil {
		if c := cat(cur); bytes.Compare(c, k) < 0 {
			k = c
		}
	}
	return k
}

// keySuccessor is the smallest key after every key that starts with k.
func keySuccessor(k []byte) []byte {
	out := bytes.Clone(k)
	for i := len(out) - 1; i >= 0; i-- {
		if out[i] != 0xff {
			out[i]++
			return out[:i+1]
		}
	}
	return nil // never for our keys, which start with a space tag
}

func complement(b []byte) []byte {
	if b == nil {
		return nil
	}
	out := make([]byte, len(b))
	for i, c := range b {
		out[i] = ^c
	}
	return out
}

// declaredRange is the range of a ready declared index that serves the
// query: its equality prefix, then the range filter's bounds on the next
// field, if the query has one.
func (x *queryRun) declaredRange(d IndexState, eq []byte, reverse bool) keyRange {
	p := bytes.Clone(declaredKeyPrefix(x.pid, d.ID))
	if !d.CollectionGroup {
		p = append(p, x.parent...)
		p = append(p, 0)
	}
	r := keyRange{prefix: append(p, eq...), reverse: reverse}
	field, lo, hi, loInc, hiInc, ok := x.c.Range()
	if !ok {
		r.exact = x.onlyEqualities("")
		return r
	}
	eqs := x.c.Equalities()
	if _, pinned := eqs[field]; pinned {
		return r // the equality pins the field; Match applies the range
	}
	// The range field is the index's first field after the equalities.
	var next *query.IndexField
	for i := range d.Fields {
		if _, isEq := eqs[d.Fields[i].Field]; !isEq {
			next = &d.Fields[i]
			break
		}
	}
	if next == nil || next.Field != field {
		return r // not as Serves promised: scan the whole prefix, Match decides
	}
	lo, loInc, hi, hiInc = typeBounds(x.rangeOperand(field), lo, loInc, hi, hiInc)
	r.exact = x.onlyEqualities(field)
	if next.Direction == "desc" {
		r.lo, r.loInc, r.hi, r.hiInc = complement(hi), hiInc, complement(lo), loInc
	} else {
		r.lo, r.loInc, r.hi, r.hiInc = lo, loInc, hi, hiInc
	}
	return r
}

// onlyEqualities reports whether the query's filters are "==" on distinct
// fields and range filters on rangeField ("": none) whose operands are all
// of one type, which a key range decides exactly.
func (x *queryRun) onlyEqualities(rangeField string) bool {
	seen := map[string]bool{}
	var kind byte
	for _, f := range x.c.Q.Where {
		switch f.Op {
		case "==":
			if seen[f.Field] || f.Field == rangeField {
				return false
			}
			seen[f.Field] = true
		case "<", "<=", ">", ">=":
			k := jsonKind(f.Value)
			if f.Field != rangeField || (kind != 0 && k != kind) {
				return false
			}
			kind = k
		default:
			return false
		}
	}
	return true
}

// jsonKind is the type of a JSON value, by its first byte: 'n'ull,
// 'b'oolean, 's'tring, 'a'rray, 'o'bject or 'd' for a number.
func jsonKind(v json.RawMessage) byte {
	v = bytes.TrimLeft(v, " \t\r\n")
	if len(v) == 0 {
		return 0
	}
	switch v[0] {
	case 'n':
		return 'n'
	case 't', 'f':
		return 'b'
	case '"':
		return 's'
	case '[':
		return 'a'
	case '{':
		return 'o'
	}
	return 'd'
}

// rangeOperand is the operand of the query's first range filter on field.
func (x *queryRun) rangeOperand(field string) json.RawMessage {
	for _, f := range x.c.Q.Where {
		switch f.Op {
		case "<", "<=", ">", ">=":
			if f.Field == field {
				return f.Value
			}
		}
	}
	return nil
}

// typeBounds closes the open sides of a range with the bounds of the
// operand's type: only values of that type match a range filter, so a scan
// of "> 10" stops before the strings.
func typeBounds(op json.RawMessage, lo []byte, loInc bool, hi []byte, hiInc bool) ([]byte, bool, []byte, bool) {
	enc := func(v string) []byte { return query.AppendValue(nil, json.RawMessage(v), false) }
	var tlo, thi []byte
	var tloInc, thiInc bool
	switch jsonKind(op) {
	case 0:
		return lo, loInc, hi, hiInc
	case 'n':
		tlo, tloInc, thi, thiInc = enc(`null`), true, enc(`null`), true
	case 'b':
		tlo, tloInc, thi, thiInc = enc(`false`), true, enc(`true`), true
	case 's':
		tlo, tloInc, thi, thiInc = enc(`""`), true, enc(`[]`), false
	case 'a':
		tlo, tloInc, thi, thiInc = enc(`[]`), true, enc(`{}`), false
	case 'o':
		tlo, tloInc = enc(`{}`), true
	default: // a number
		tlo, tloInc, thi, thiInc = enc(`true`), false, enc(`""`), false
	}
	if lo == nil {
		lo, loInc = tlo, tloInc
	}
	if hi == nil {
		hi, hiInc = thi, thiInc
	}
	return lo, loInc, hi, hiInc
}

// pickAuto chooses the automatic index of one of the query's equalities on
// a top-level field with a scalar operand: the one with the fewest entries
// (counted up to the scan limit).
func (x *queryRun) pickAuto() (string, []byte, bool) {
	var fields []string
	eqs := x.c.Equalities()
	for f := range eqs {
		if !strings.Contains(f, ".") && autoOperand(x.eqOperand(f)) {
			fields = append(fields, f)
		}
	}
	if len(fields) == 0 {
		return "", nil, false
	}
	slices.Sort(fields)
	prefix := func(f string) []byte { return append(bytes.Clone(autoKeyPrefix(x.parent, f)), eqs[f]...) }
	best := fields[0]
	if len(fields) == 1 {
		return best, prefix(best), true
	}
	bestN := x.countKeys(prefix(best), x.scanLimit+1)
	for _, f := range fields[1:] {
		// Counting stops where it could no longer beat the best so far.
		if n := x.countKeys(prefix(f), bestN); n < bestN {
			best, bestN = f, n
		}
	}
	return best, prefix(best), true
}

// eqOperand is the operand of the last "==" clause on field (the one
// Equalities keeps).
func (x *queryRun) eqOperand(field string) json.RawMessage {
	var v json.RawMessage
	for _, f := range x.c.Q.Where {
		if f.Op == "==" && f.Field == field {
			v = f.Value
		}
	}
	return v
}

// autoOperand reports whether the automatic index holds values equal to v:
// null, booleans, numbers and strings of at most maxAutoString bytes.
func autoOperand(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return false
	}
	switch v[0] {
	case '{', '[':
		return false
	case '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return false
		}
		return len(s) <= maxAutoString
	}
	return true
}

// countKeys counts the keys under prefix, up to max.
func (x *queryRun) countKeys(prefix []byte, max int) int {
	opts := badger.DefaultIteratorOptions
	opts.PrefetchValues = false
	opts.Prefix = prefix
	it := x.txn.NewIterator(opts)
	defer it.Close()
	n := 0
	for it.Seek(prefix); it.ValidForPrefix(prefix) && n < max; it.Next() {
		n++
	}
	return n
}

// isSystemPath reports whether a stored path has a segment after the
// project id that starts with "_": system state, never a query result.
func isSystemPath(path string) bool {
	_, rest, _ := strings.Cut(path, "/")
	return systemSegmentEnd(rest) >= 0
}

// systemSegmentEnd is the end offset in rest of its first segment that
// starts with "_", or -1.
func systemSegmentEnd(rest string) int {
	for off := 0; off < len(rest); {
		end := strings.IndexByte(rest[off:], '/')
		if end < 0 {
			end = len(rest)
		} else {
			end += off
		}
		if rest[off] == '_' {
			return end
		}
		off = end + 1
	}
	return -1
}

// stream runs a plan whose entries come in query order: a page (or the
// count) straight from the range, each document fetched by the entry's
// path and judged by Match and Allow. A page examines at most scanLimit
// entries; a count examines the whole range.
func (x *queryRun) stream(plan string, r keyRange) (*QueryResult, error) {
	opts := badger.DefaultIteratorOptions
	keysOnly := x.count && x.allow == nil && r.exact
	if keysOnly {
		opts.PrefetchValues = false
	} else if !x.count {
		opts.PrefetchSize = min(x.limit+1, opts.PrefetchSize)
	}
	opts.Reverse = r.reverse
	if !r.reverse {
		// Badger checks the prefix in Valid, which a backward seek from
		// past the range would fail on its first key: ValidForPrefix ends
		// the reverse scan instead.
		opts.Prefix = r.prefix
	}
	it := x.txn.NewIterator(opts)
	defer it.Close()
	var cur []byte // the cursor as a tail
	if x.after != nil {
		cur = x.after
		if r.reverse {
			cur = complement(x.after)
		}
	}
	res := &QueryResult{Plan: plan}
	it.Seek(r.start(cur))
	if r.reverse && it.Valid() && !bytes.HasPrefix(it.Item().Key(), r.prefix) && bytes.Compare(it.Item().Key(), r.prefix) > 0 {
		it.Next() // the key just after the range, where a backward seek lands
	}
	var lastExamined, lastReturned []byte
	examined, size := 0, 0
	for ; it.ValidForPrefix(r.prefix); it.Next() {
		item := it.Item()
		tail := item.Key()[len(r.prefix):]
		if cur != nil {
			c := bytes.Compare(tail, cur)
			if (!r.reverse && c <= 0) || (r.reverse && c >= 0) {
				continue
			}
		}
		if r.reverse {
			if r.aboveHi(tail) {
				continue
			}
			if r.belowLo(tail) {
				break
			}
		} else {
			if r.belowLo(tail) {
				continue
			}
			if r.aboveHi(tail) {
				break
			}
		}
		if keysOnly {
			res.Count++
			if err := x.checkCtx(res.Count); err != nil {
				return nil, err
			}
			continue
		}
		if !x.count && examined >= x.scanLimit {
			// The budget of this call is spent: the client continues after
			// the last entry examined.
			res.NextCursor = x.c.Cursor(lastExamined)
			break
		}
		examined++
		if err := x.checkCtx(examined); err != nil {
			return nil, err
		}
		var sk []byte
		if r.reverse {
			sk = complement(tail)
		} else {
			sk = bytes.Clone(tail)
		}
		lastExamined = sk
		pathb, err := item.ValueCopy(nil)
		if err != nil {
			return nil, fmt.Errorf("read index entry: %w", err)
		}
		path := string(pathb)
		if isSystemPath(path) {
			continue
		}
		doc, err := getDoc(x.txn, path)
		if err != nil {
			return nil, err
		}
		if doc == nil {
			return nil, fmt.Errorf("%w: %q (key %q)", errIndexEntryDangling, path, item.Key())
		}
		// An exact range needs no Match: its key already decided the filters.
		if (!r.exact && !x.c.Match(doc.Data)) || !x.allowed(doc) {
			continue
		}
		if x.count {
			res.Count++
			continue
		}
		if len(res.Documents) == x.limit || (len(res.Documents) > 0 && size >= maxListBytes) {
			// Another document follows the full page.
			res.NextCursor = x.c.Cursor(lastReturned)
			break
		}
		res.Documents = append(res.Documents, doc)
		size += len(doc.Data)
		lastReturned = sk
	}
	return res, nil
}

// collect runs a plan whose candidates do not come in query order. Each
// candidate's data is decoded once (MatchKey) where it is stored, and only
// the matches after the cursor that could be on the page are copied: the
// best limit+1 are kept in a bounded heap, sorted, and fill the page. limited
// refuses the query once more than scanLimit candidates are examined.
//
// The caller's rule (Allow) is asked first only of the kept documents, in
// order; if it refuses some of them and more matches were left out, the
// candidates are read again with the rule applied before keeping, so the
// page is the first allowed matches as if every match had been judged.
func (x *queryRun) collect(plan string, limited, building bool, each func(fn func(path string, val []byte) error) error) (*QueryResult, error) {
	if x.count {
		return x.collectCount(plan, limited, building, each)
	}
	keep := x.limit + 1
	top, total, err := x.collectTop(limited, building, each, keep, false)
	if err != nil {
		return nil, err
	}
	res := &QueryResult{Plan: plan}
	if x.fillPage(res, top, x.allow != nil) || total <= keep {
		return res, nil
	}
	// The rule refused kept documents and others were left out: keep the
	// best allowed ones instead.
	top, _, err = x.collectTop(limited, building, each, keep, true)
	if err != nil {
		return nil, err
	}
	*res = QueryResult{Plan: plan}
	x.fillPage(res, top, false)
	return res, nil
}

// fillPage fills res with the documents of top (sorted, in query order),
// asking the rule of each when judge; it reports whether the page is
// complete: full with a next document seen, or cut by the byte cap.
func (x *queryRun) fillPage(res *QueryResult, top []kept, judge bool) bool {
	var lastReturned []byte
	size := 0
	for _, m := range top {
		if judge && !x.allow(m.doc) {
			continue
		}
		if len(res.Documents) == x.limit || (len(res.Documents) > 0 && size >= maxListBytes) {
			res.NextCursor = x.c.Cursor(lastReturned)
			return true
		}
		res.Documents = append(res.Documents, m.doc)
		size += len(m.doc.Data)
		lastReturned = m.key
	}
	return false
}

// kept is a match collect keeps: its SortKey and document.
type kept struct {
	key []byte
	doc *Document
}

// candidate is the start of examining the n-th candidate of a plan without
// an order of its own: the scan limit (when limited), the context, and the
// stored document's data (val is its encoded form).
func (x *queryRun) candidate(limited, building bool, n int, path string, val []byte) ([]byte, error) {
	if limited && n > x.scanLimit {
		return nil, x.indexRequired(building)
	}
	if err := x.checkCtx(n); err != nil {
		return nil, err
	}
	if len(val) < docHeaderLen || val[0] != docVersion {
		return nil, fmt.Errorf("decode document %q: bad header", path)
	}
	return val[docHeaderLen:], nil
}

// collectTop examines every candidate and returns the best n matches after
// the cursor (with judge: that the rule allows), sorted in query order, and
// how many matches there were in all.
func (x *queryRun) collectTop(limited, building bool, each func(fn func(string, []byte) error) error, n int, judge bool) ([]kept, int, error) {
	// h is a max-heap on key: h[0] is the worst kept match.
	var h []kept
	examined, total := 0, 0
	err := each(func(path string, val []byte) error {
		examined++
		data, err := x.candidate(limited, building, examined, path, val)
		if err != nil {
			return err
		}
		sk, ok := x.c.MatchKey(path, data)
		if !ok || (x.after != nil && bytes.Compare(sk, x.after) <= 0) {
			return nil
		}
		total++
		if len(h) == n && bytes.Compare(sk, h[0].key) >= 0 {
			return nil
		}
		doc, err := decodeDoc(path, val)
		if err != nil {
			return err
		}
		if judge && !x.allow(doc) {
			total--
			return nil
		}
		if len(h) < n {
			h = append(h, kept{key: sk, doc: doc})
			heapUp(h, len(h)-1)
			return nil
		}
		h[0] = kept{key: sk, doc: doc}
		heapDown(h, 0)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	slices.SortFunc(h, func(a, b kept) int { return bytes.Compare(a.key, b.key) })
	return h, total, nil
}

func heapUp(h []kept, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if bytes.Compare(h[i].key, h[p].key) <= 0 {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func heapDown(h []kept, i int) {
	for {
		l, big := 2*i+1, i
		if l < len(h) && bytes.Compare(h[l].key, h[big].key) > 0 {
			big = l
		}
		if r := l + 1; r < len(h) && bytes.Compare(h[r].key, h[big].key) > 0 {
			big = r
		}
		if big == i {
			return
		}
		h[i], h[big] = h[big], h[i]
		i = big
	}
}

// collectCount counts the allowed matches after the cursor.
func (x *queryRun) collectCount(plan string, limited, building bool, each func(fn func(string, []byte) error) error) (*QueryResult, error) {
	res := &QueryResult{Plan: plan}
	examined := 0
	err := each(func(path string, val []byte) error {
		examined++
		data, err := x.candidate(limited, building, examined, path, val)
		if err != nil {
			return err
		}
		if x.after != nil {
			sk, ok := x.c.MatchKey(path, data)
			if !ok || bytes.Compare(sk, x.after) <= 0 {
				return nil
			}
		} else if !x.c.Match(data) {
			return nil
		}
		if x.allow != nil {
			doc, err := decodeDoc(path, val)
			if err != nil {
				return err
			}
			if !x.allow(doc) {
				return nil
			}
		}
		res.Count++
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// eachEntry calls fn with the path and stored value (valid only during the
// call) of the document of every entry under an index prefix, in key order.
// The entries of one value come in path order, the documents' order: one
// iterator walks the documents alongside, stepping a few keys forward to
// the next one and seeking further ones, cheaper than a point read each.
func (x *queryRun) eachEntry(prefix []byte, fn func(string, []byte) error) error {
	opts := badger.DefaultIteratorOptions
	opts.PrefetchValues = false
	opts.Prefix = prefix
	it := x.txn.NewIterator(opts)
	defer it.Close()
	dopts := badger.DefaultIteratorOptions
	dopts.PrefetchValues = false
	dopts.Prefix = docKey(x.parent + "/")
	docs := x.txn.NewIterator(dopts)
	defer docs.Close()
	var key []byte
	for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
		var path string
		if err := it.Item().Value(func(v []byte) error { path = string(v); return nil }); err != nil {
			return fmt.Errorf("read index entry: %w", err)
		}
		if isSystemPath(path) {
			continue
		}
		key = append(append(key[:0], spaceDoc), path...)
		if !docs.Valid() || bytes.Compare(docs.Item().Key(), key) > 0 {
			docs.Seek(key)
		} else {
			for step := 0; docs.Valid() && bytes.Compare(docs.Item().Key(), key) < 0; step++ {
				if step == entryWalkSteps {
					docs.Seek(key)
					break
				}
				docs.Next()
			}
		}
		found := docs.Valid() && bytes.Equal(docs.Item().Key(), key)
		if !found {
			return fmt.Errorf("%w: %q (key %q)", errIndexEntryDangling, path, it.Item().Key())
		}
		if err := docs.Item().Value(func(v []byte) error { return fn(path, v) }); err != nil {
			return err
		}
	}
	return nil
}

// entryWalkSteps is how many documents eachEntry steps over before it
// seeks instead.
const entryWalkSteps = 8

// eachChild calls fn with every user document directly in the collection,
// skipping deeper descendants with one seek per child subtree (as
// listChildren does).
func (x *queryRun) eachChild(fn func(string, []byte) error) error {
	prefix := docKey(x.parent + "/")
	opts := badger.DefaultIteratorOptions
	opts.Prefix = prefix
	it := x.txn.NewIterator(opts)
	defer it.Close()
	for it.Seek(prefix); it.ValidForPrefix(prefix); {
		key := it.Item().Key()
		rest := key[len(prefix):]
		if i := bytes.IndexByte(rest, '/'); i >= 0 {
			it.Seek(append(bytes.Clone(key[:len(prefix)+i]), '0'))
			continue
		}
		if len(rest) == 0 || rest[0] == '_' {
			it.Next()
			continue
		}
		path := string(key[1:])
		if err := it.Item().Value(func(v []byte) error { return fn(path, v) }); err != nil {
			return err
		}
		it.Next()
	}
	return nil
}

// eachInGroup calls fn with every user document of the project whose
// parent's last segment is the collection name, at any depth. Keys are read
// without values; system subtrees are skipped with one seek each.
func (x *queryRun) eachInGroup(fn func(string, []byte) error) error {
	coll := x.c.Q.Collection
	prefix := docKey(x.pid + "/")
	opts := badger.DefaultIteratorOptions
	opts.PrefetchValues = false
	opts.Prefix = prefix
	it := x.txn.NewIterator(opts)
	defer it.Close()
	visited := 0
	for it.Seek(prefix); it.ValidForPrefix(prefix); {
		visited++
		if err := x.checkCtx(visited); err != nil {
			return err
		}
		key := it.Item().Key()
		rest := string(key[len(prefix):])
		if end := systemSegmentEnd(rest); end >= 0 {
			// Everything between "_x" and "_x0" is under a system segment.
			it.Seek(append(bytes.Clone(key[:len(prefix)+end]), '0'))
			continue
		}
		if !inGroup(rest, coll) {
			it.Next()
			continue
		}
		path := string(key[1:])
		if err := it.Item().Value(func(v []byte) error { return fn(path, v) }); err != nil {
			return err
		}
		it.Next()
	}
	return nil
}

// inGroup reports whether a path below the project ("a/b/coll/id") is a
// document of a collection named coll.
func inGroup(rest, coll string) bool {
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return false
	}
	parent := rest[:i]
	return parent[strings.LastIndexByte(parent, '/')+1:] == coll
}
