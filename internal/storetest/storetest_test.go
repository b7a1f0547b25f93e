package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/edgebase/edgebase/raftstore"
)

func TestOpenLeadsAndCommits(t *testing.T) {
	s := Open(t, raftstore.Config{ChangeLogRetention: time.Minute})
	res, err := s.Txn(context.Background(), &raftstore.Txn{Time: 1, Ops: []raftstore.Op{{Kind: raftstore.OpPut, Path: "p/a", Data: []byte(`{"v":1}`)}}})
	if err != nil || !res.OK() {
		t.Fatalf("commit: %+v, %v", res, err)
	}
	d, err := s.Get("p/a")
	if err != nil || d == nil || string(d.Data) != `{"v":1}` {
		t.Fatalf("read back %+v, %v", d, err)
	}
}
