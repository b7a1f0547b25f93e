package raftstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func ptrU64(v uint64) *uint64 { return &v }

// mustEncodeJSON frames tx in the JSON encoding (version 1).
func mustEncodeJSON(t testing.TB, tx *Txn) []byte {
	t.Helper()
	b, err := encodeTxnJSON(tx)
	if err != nil {
		t.Fatalf("encode json txn: %v", err)
	}
	return b
}

// codecTxns are hand-picked transactions plus the FSM tests' random ones.
func codecTxns() []*Txn {
	txns := []*Txn{
		{},
		{Time: -1},
		{Time: math.MaxInt64, Ops: []Op{{Kind: OpPut, Path: "a/b", Data: json.RawMessage(`{"x":1}`)}}},
		{Time: math.MinInt64, Conds: []Cond{{Path: "p/q", Kind: CondRevision, Revision: math.MaxUint64}}},
		{Time: 7, Conds: []Cond{
			{Path: "p/x", Kind: CondExists}, {Path: "p/y", Kind: CondNotExists}, {Path: "p/z", Kind: CondRevision},
			{Path: "", Kind: ""}, {Path: "p/é/✓", Kind: "sideways"},
		}, Ops: []Op{
			{Kind: OpDelete, Path: "p/x", IfExists: true},
			{Kind: OpSetField, Path: "p/y", Field: "f", Data: json.RawMessage(`"<&>\u00e9"`)},
			{Kind: OpRenameField, Path: "p/y", Field: "f", NewField: "g", Data: json.RawMessage(`[1,2,{"a":null}]`)},
			{Kind: OpDeleteField, Path: "p/y", Field: "g"},
			{Kind: "explode", Path: "p/w"},
			{Kind: OpPut, Path: "p/big", Data: json.RawMessage(blobObject(600<<10, 'q'))},
		}},
		{Time: 9, Caller: "a-session-hash", Ops: []Op{
			{Kind: OpIncrement, Path: "p/c", Field: "n", Data: json.RawMessage(`-2.5`), Match: new(uint64)},
			{Kind: OpServerTimestamp, Path: "p/c", Field: "at"},
			{Kind: OpArrayUnion, Path: "p/c", Field: "tags", Data: json.RawMessage(`["a",{"b":1}]`), Match: ptrU64(math.MaxUint64 - 1)},
			{Kind: OpArrayRemove, Path: "p/c", Field: "tags", Data: json.RawMessage(`["a"]`)},
		}},
	}
	g := newLogGen(42)
	for i := uint64(1); i <= 500; i++ {
		txns = append(txns, g.txn(i))
	}
	return txns
}

// normalTxn is t with empty slices as nil and op data compacted: what the
// decoders return for t's entry.
func normalTxn(t *Txn) *Txn {
	c := *t
	if len(c.Conds) == 0 {
		c.Conds = nil
	}
	if len(c.Ops) == 0 {
		c.Ops = nil
	}
	c.Ops = append([]Op(nil), c.Ops...)
	for i := range c.Ops {
		if len(c.Ops[i].Data) == 0 {
			c.Ops[i].Data = nil
			continue
		}
		var d bytes.Buffer
		if json.Compact(&d, c.Ops[i].Data) == nil {
			c.Ops[i].Data = d.Bytes()
		}
	}
	return &c
}

func TestTxnCodec_RoundTripAndAgreesWithJSON(t *testing.T) {
	for i, tx := range codecTxns() {
		b, err := EncodeTxn(tx)
		if err != nil {
			t.Fatalf("txn %d: encode: %v", i, err)
		}
		if b[0] != byte(cmdTxn) || b[1] != txnVersionLatest {
			t.Fatalf("txn %d: framed as type %d version %d", i, b[0], b[1])
		}
		// The version 2 entry of the same txn (what the binary before
		// decided entries writes) decodes to the same thing.
		if !tx.needsDecided() {
			b2, err := encodeTxnBinary(tx)
			if err != nil {
				t.Fatalf("txn %d: encode version 2: %v", i, err)
			}
			got2, err := decodeTxn(b2)
			if err != nil || !reflect.DeepEqual(normalTxn(got2), normalTxn(tx)) {
				t.Fatalf("txn %d: version 2 round trip: %+v, %v", i, got2, err)
			}
		} else if _, err := encodeTxnBinary(tx); err == nil {
			t.Fatalf("txn %d needs a decided entry, and version 2 encoded it", i)
		}
		got, err := decodeTxn(b)
		if err != nil {
			t.Fatalf("txn %d: decode: %v", i, err)
		}
		want := normalTxn(tx)
		if !reflect.DeepEqual(normalTxn(got), want) {
			t.Fatalf("txn %d: round trip\n got %+v\nwant %+v", i, got, want)
		}
		// The entry an earlier binary wrote for the same txn decodes to the
		// same thing.
		old, err := decodeTxn(mustEncodeJSON(t, tx))
		if err != nil {
			t.Fatalf("txn %d: decode json: %v", i, err)
		}
		if !reflect.DeepEqual(normalTxn(old), normalTxn(got)) {
			t.Fatalf("txn %d: json and binary disagree\njson   %+v\nbinary %+v", i, old, got)
		}
		// The decoded txn owns its memory: scribbling over the entry
		// changes nothing.
		for j := range b {
			b[j] = 0xff
		}
		if !reflect.DeepEqual(normalTxn(got), want) {
			t.Fatalf("txn %d: decoded txn shares memory with the entry", i)
		}
	}
}

func TestTxnCodec_DataIsCompactedAndMustBeJSON(t *testing.T) {
	b, err := EncodeTxn(&Txn{Ops: []Op{{Kind: OpPut, Path: "a/b", Data: json.RawMessage(" {\n \"x\" : [ 1 , \"<a b>\" ] }\t")}}})
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	got, err := decodeTxn(b)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if d := string(got.Ops[0].Data); d != `{"x":[1,"<a b>"]}` {
		t.Fatalf("data %s, want it compacted, strings untouched", d)
	}
	for _, bad := range []string{`{"x":`, `{} {}`, `nul`, `{'x':1}`} {
		if _, err := EncodeTxn(&Txn{Ops: []Op{{Kind: OpPut, Path: "a/b", Data: json.RawMessage(bad)}}}); err == nil {
			t.Errorf("data %q encoded", bad)
		}
	}
}

func TestTxnCodec_MalformedEntriesAreRefused(t *testing.T) {
	tx := codecTxns()[4]
	b, err := EncodeTxn(tx)
	if err != nil {
		t.Fatal(err)
	}
	// Every entry cut short, and every one with a byte too many.
	for n := 2; n < len(b); n++ {
		if _, err := decodeTxn(b[:n]); !errors.Is(err, errBadTxn) {
			t.Fatalf("entry cut to %d of %d bytes: err %v, want errBadTxn", n, len(b), err)
		}
	}
	if _, err := decodeTxn(append(append([]byte(nil), b...), 0)); !errors.Is(err, errBadTxn) {
		t.Fatalf("a trailing byte: err %v, want errBadTxn", err)
	}
	head := []byte{byte(cmdTxn), txnVersionBinary, 0} // time 0
	for name, body := range map[string][]byte{
		"ifExists 2":            {0, 1, 0, 0, 0, 0, 0, 2},
		"cond count past entry": {0xff, 0xff, 0xff, 0xff, 0x0f},
		"op count past entry":   {0, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"string past entry":     {1, 0xff, 0x01, 'a'},
		"overlong varint":       {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	} {
		if _, err := decodeTxn(append(append([]byte(nil), head...), body...)); !errors.Is(err, errBadTxn) {
			t.Errorf("%s: err %v, want errBadTxn", name, err)
		}
	}
	for _, v := range []byte{0, 4, 255} {
		if _, err := decodeTxn([]byte{byte(cmdTxn), v, 0, 0, 0}); !errors.Is(err, errUnknownCommand) {
			t.Errorf("version %d: err %v, want errUnknownCommand", v, err)
		}
	}
}

// Entries written by earlier binaries (JSON) and by this one (binary) apply
// to the same state.
func TestFSM_JSONAndBinaryEntriesApplyAlike(t *testing.T) {
	g := newLogGen(99)
	var jsonLogs, binLogs []*raft.Log
	for i := uint64(1); i <= 1000; i++ {
		tx := g.txn(i)
		jsonLogs = append(jsonLogs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: mustEncodeJSON(t, tx)})
		binLogs = append(binLogs, txnLog(t, i, tx))
	}
	if binLogs[0].Data[1] != txnVersionLatest {
		t.Fatalf("txnLog framed version %d", binLogs[0].Data[1])
	}
	a, b := mustOpenFSM(t, t.TempDir()), mustOpenFSM(t, t.TempDir())
	ra := applyInBatches(a, jsonLogs, func() int { return 64 })
	rb := applyInBatches(b, binLogs, func() int { return 64 })
	if ok, diff := sameResults(ra, rb); !ok {
		t.Fatalf("results differ between json and binary entries: %s", diff)
	}
	da, db := dumpDB(t, a), dumpDB(t, b)
	assertSameDump(t, "tree db", db, da)
	if n := len(dumpKeys(da)); n < 5 {
		t.Fatalf("only %d documents in the final state: the log proves little", n)
	}
}

func FuzzDecodeTxn(f *testing.F) {
	for _, tx := range codecTxns()[:8] {
		b, err := EncodeTxn(tx)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[2:])
	}
	f.Add([]byte(strings.Repeat("\x01", 40)))
	f.Fuzz(func(t *testing.T, body []byte) {
		tx, err := decodeTxnBinary(txnVersionDecided, body)
		if err != nil {
			if !errors.Is(err, errBadTxn) {
				t.Fatalf("error %v does not wrap errBadTxn", err)
			}
			return
		}
		for _, op := range tx.Ops {
			if len(op.Data) > 0 && !json.Valid(op.Data) {
				return // decodable, but EncodeTxn would not write it
			}
		}
		b, err := EncodeTxn(tx)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		again, err := decodeTxn(b)
		if err != nil {
			t.Fatalf("decode the re-encoding: %v", err)
		}
		if !reflect.DeepEqual(normalTxn(again), normalTxn(tx)) {
			t.Fatalf("re-encoding changed the txn:\n got %+v\nwant %+v", again, tx)
		}
	})
}

// entryVersion is the encoding version of the log entry at idx on s.
func entryVersion(t *testing.T, s *Store, idx uint64) byte {
	t.Helper()
	var l raft.Log
	if err := s.logs.GetLog(idx, &l); err != nil {
		t.Fatalf("log entry %d: %v", idx, err)
	}
	if len(l.Data) < 2 || l.Data[0] != byte(cmdTxn) {
		t.Fatalf("log entry %d is not a txn: %q", idx, l.Data)
	}
	return l.Data[1]
}

// A cluster writes binary entries only once every member has recorded that
// it reads them, and refuses to add a node that does not; until then, and
// on a member that does not know yet, entries are JSON, which every binary
// reads.
func TestStore_BinaryTxnsOnlyWhenEveryMemberReadsThem(t *testing.T) {
	c := newRVCluster(t, 3, rvTuning())
	n1, n3 := c.nodes[0].s, c.nodes[2].s
	write := func(s *Store, path string) uint64 {
		t.Helper()
		res, err := s.Txn(ctxT(t, 10*time.Second), &Txn{Time: 1, Ops: []Op{put(path, `{"v":1}`)}})
		if err != nil || !res.OK() {
			t.Fatalf("write %s: %+v, %v", path, res, err)
		}
		return res.Revision
	}
	readBack := func(s *Store, path string) {
		t.Helper()
		if err := s.WaitRead(ctxT(t, 10*time.Second), Strong, 0); err != nil {
			t.Fatal(err)
		}
		if d, err := s.Get(path); err != nil || d == nil || string(d.Data) != `{"v":1}` {
			t.Fatalf("%s on %s: %+v, %v", path, s.cfg.NodeID, d, err)
		}
	}

	// Every member started with this binary: the encoding switches, on the
	// leader and on a follower (whose writes are forwarded as encoded).
	for _, nd := range c.nodes {
		s := nd.s
		mustEventually(t, 10*time.Second, nd.id+" writes binary txns", func() (bool, string) { return s.txnLevel.Load() == uint32(txnVersionLatest), "" })
	}
	if v := entryVersion(t, n1, write(n1, "p/leader")); v != txnVersionLatest {
		t.Fatalf("leader's entry has version %d, want %d", v, txnVersionLatest)
	}
	if v := entryVersion(t, n1, write(n3, "p/follower")); v != txnVersionLatest {
		t.Fatalf("follower's forwarded entry has version %d, want %d", v, txnVersionLatest)
	}
	readBack(n3, "p/leader")
	readBack(n1, "p/follower")

	// A member whose record says nothing of the encoding (an older binary's
	// record) keeps it closed.
	old, err := json.Marshal(NodeRecord{ID: "n3", HTTPAddr: c.nodes[2].srv.URL, RaftAddr: c.nodes[2].raftAddr, Voter: true})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := n1.Txn(ctxT(t, 10*time.Second), &Txn{Time: 1, Ops: []Op{{Kind: OpPut, Path: NodeRecordPath("n3"), Data: old}}}); err != nil || !res.OK() {
		t.Fatalf("write n3's old record: %+v, %v", res, err)
	}
	if v := n1.everyMemberReads(); v != txnVersion {
		t.Fatalf("every member reads txn version %d, with n3's record of an older binary", v)
	}
	n1.txnLevel.Store(uint32(txnVersion)) // as before the switch
	idx := write(n1, "p/json")
	if v := entryVersion(t, n1, idx); v != txnVersion {
		t.Fatalf("entry written with the switch off has version %d, want %d", v, txnVersion)
	}
	readBack(n3, "p/json")

	// A member that reads binary entries but not decided ones (the binary
	// before them): a txn that needs a decision in Apply is decided by the
	// proposer and written as a version 2 entry of plain puts, conditioned
	// on what the decision read.
	v2, err := json.Marshal(NodeRecord{ID: "n3", HTTPAddr: c.nodes[2].srv.URL, RaftAddr: c.nodes[2].raftAddr, Voter: true, TxnVersion: txnVersionBinary})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := n1.Txn(ctxT(t, 10*time.Second), &Txn{Time: 1, Ops: []Op{{Kind: OpPut, Path: NodeRecordPath("n3"), Data: v2}}}); err != nil || !res.OK() {
		t.Fatalf("write n3's version 2 record: %+v, %v", res, err)
	}
	if v := n1.everyMemberReads(); v != txnVersionBinary {
		t.Fatalf("every member reads txn version %d, want %d", v, txnVersionBinary)
	}
	for _, nd := range c.nodes {
		nd.s.txnLevel.Store(uint32(txnVersionBinary))
	}
	for i := range 3 {
		res, err := n3.Txn(ctxT(t, 10*time.Second), &Txn{Time: 1, Ops: []Op{{Kind: OpIncrement, Path: "p/counter", Field: "n", Data: json.RawMessage("2")}}})
		if err != nil || !res.OK() {
			t.Fatalf("increment %d through n3: %+v, %v", i, res, err)
		}
		if got, want := string(res.Docs[0].Data), fmt.Sprintf(`{"n":%d}`, 2*(i+1)); got != want || res.Docs[0].Revision != res.Revision {
			t.Fatalf("increment %d answered %s at revision %d (entry %d), want %s", i, got, res.Docs[0].Revision, res.Revision, want)
		}
		if v := entryVersion(t, n1, res.Revision); v != txnVersionBinary {
			t.Fatalf("increment's entry has version %d, want %d", v, txnVersionBinary)
		}
	}
	zero := uint64(0)
	if res, err := n1.Txn(ctxT(t, 10*time.Second), &Txn{Time: 1, Ops: []Op{{Kind: OpPut, Path: "p/counter", Data: json.RawMessage(`{}`), Match: &zero}}}); err != nil || res.Err != ErrCodeCondFailed || !res.OpFailed {
		t.Fatalf("a create over an existing document, decided ahead: %+v, %v, want cond_failed at the op", res, err)
	}
	if err := n3.EnsureNodeRecord(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if v := n1.everyMemberReads(); v != txnVersionLatest {
		t.Fatalf("n3 recorded that it reads txn version %d, and every member reads %d", txnVersionLatest, v)
	}

	// A node that does not say it reads binary entries is not added, and
	// the answer on the wire says why.
	err = n1.Join(ctxT(t, 10*time.Second), JoinRequest{ID: "n9", RaftAddr: "127.0.0.1:1", HTTPAddr: "http://127.0.0.1:1", Voter: true})
	if !errors.Is(err, ErrJoinerTooOld) {
		t.Fatalf("join without txnVersion: %v, want ErrJoinerTooOld", err)
	}
	body := strings.NewReader(`{"id":"n9","raftAddr":"127.0.0.1:1","httpAddr":"http://127.0.0.1:1","voter":false}`)
	req, err := http.NewRequest(http.MethodPost, c.nodes[1].srv.URL+InternalPrefix+"join", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(SecretHeader, testSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(msg), "older than the cluster") {
		t.Fatalf("join through a follower: %d %s, want 409 saying the binary is older", resp.StatusCode, msg)
	}
	f := n1.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	if n := len(f.Configuration().Servers); n != 3 {
		t.Fatalf("configuration has %d servers after refused joins, want 3", n)
	}
}
