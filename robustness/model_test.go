package robustness

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Builders for hand-written histories.

func hPut(k, v string) Input { return Input{Kind: OpPut, Key: k, Value: v} }
func hGet(k string) Input    { return Input{Kind: OpGet, Key: k} }
func hCAS(k string, ifRev uint64, v string) Input {
	return Input{Kind: OpCAS, Key: k, Value: v, IfRev: ifRev}
}
func hDel(k string) Input    { return Input{Kind: OpDelete, Key: k} }
func hGrant(k string) Input  { return Input{Kind: OpGrant, Key: k} }
func hRevoke(k string) Input { return Input{Kind: OpRevoke, Key: k} }
func hBatch(k, v string) Input {
	return Input{Kind: OpPut, Key: k, Value: v, Batch: true}
}
func hBatchCAS(k string, ifRev uint64, v string) Input {
	return Input{Kind: OpCAS, Key: k, Value: v, IfRev: ifRev, Batch: true}
}

func hOK(rev uint64) Output            { return Output{Outcome: OutOK, Rev: rev} }
func hGot(v string, rev uint64) Output { return Output{Outcome: OutOK, Value: v, Rev: rev} }
func hOut(o Outcome) Output            { return Output{Outcome: o} }
func hRec(c int, in Input, out Output, call, ret int64) Record {
	return Record{Client: c, Node: fmt.Sprintf("n%d", c%3), Input: in, Output: out, Call: call, Return: ret}
}

var (
	hNotFound  = hOut(OutNotFound)
	hPrecond   = hOut(OutPrecondition)
	hFailed    = hOut(OutFailed)
	hUnknown   = hOut(OutUnknown)
	hForbidden = hOut(OutForbidden)
)

type modelHistoryCase struct {
	name string
	recs []Record
}

func legalModelHistories() []modelHistoryCase {
	return append([]modelHistoryCase{
		{"sequential put get cas delete", []Record{
			hRec(0, hPut("a", "1"), hOK(1), 0, 1),
			hRec(0, hGet("a"), hGot("1", 1), 2, 3),
			hRec(0, hCAS("a", 1, "2"), hOK(3), 4, 5),
			hRec(0, hCAS("a", 1, "3"), hPrecond, 6, 7),
			hRec(0, hGet("a"), hGot("2", 3), 8, 9),
			hRec(0, hDel("a"), hOK(5), 10, 11),
			hRec(0, hGet("a"), hNotFound, 12, 13),
			hRec(0, hDel("a"), hNotFound, 14, 15),
			hRec(0, hCAS("a", 5, "x"), hNotFound, 16, 17),
			hRec(0, hCAS("a", 5, "y"), hPrecond, 18, 19),
			hRec(0, hPut("a", "4"), hOK(8), 20, 21),
			hRec(0, hGet("a"), hGot("4", 8), 22, 23),
		}},
		{"concurrent writes read in revision order", []Record{
			hRec(0, hPut("a", "x"), hOK(2), 0, 10),
			hRec(1, hPut("a", "y"), hOK(3), 1, 9),
			hRec(2, hGet("a"), hGot("y", 3), 11, 12),
		}},
		{"concurrent writes read in the other order", []Record{
			hRec(0, hPut("a", "x"), hOK(3), 0, 10),
			hRec(1, hPut("a", "y"), hOK(2), 1, 9),
			hRec(2, hGet("a"), hGot("x", 3), 11, 12),
		}},
		{"reads during concurrent writes see both", []Record{
			hRec(0, hPut("a", "x"), hOK(2), 0, 10),
			hRec(1, hPut("a", "y"), hOK(3), 1, 10),
			hRec(2, hGet("a"), hGot("x", 2), 2, 3),
			hRec(2, hGet("a"), hGot("y", 3), 4, 5),
			hRec(3, hGet("a"), hGot("y", 3), 11, 12),
		}},
		{"unknown put that later shows up in a read", []Record{
			hRec(0, hPut("a", "1"), hOK(1), 0, 1),
			hRec(0, hPut("a", "2"), hUnknown, 2, 3),
			hRec(1, hGet("a"), hGot("1", 1), 4, 5),
			hRec(1, hGet("a"), hGot("2", 4), 10, 11),
			hRec(1, hGet("a"), hGot("2", 4), 12, 13),
			hRec(1, hCAS("a", 4, "3"), hOK(6), 14, 15),
			hRec(1, hGet("a"), hGot("3", 6), 16, 17),
		}},
		{"unknown put that never shows up", []Record{
			hRec(0, hPut("a", "1"), hOK(1), 0, 1),
			hRec(0, hPut("a", "2"), hUnknown, 2, 3),
			hRec(1, hGet("a"), hGot("1", 1), 10, 11),
			hRec(1, hPut("a", "3"), hOK(5), 12, 13),
			hRec(1, hGet("a"), hGot("3", 5), 14, 15),
		}},
		{"unknown put on an absent key that never shows up", []Record{
			hRec(0, hPut("a", "1"), hUnknown, 0, 1),
			hRec(1, hGet("a"), hNotFound, 10, 11),
		}},
		{"unknown cas applied", []Record{
			hRec(0, hPut("a", "1"), hOK(1), 0, 1),
			hRec(0, hGet("a"), hGot("1", 1), 2, 3),
			hRec(0, hCAS("a", 1, "2"), hUnknown, 4, 5),
			hRec(1, hGet("a"), hGot("2", 7), 10, 11),
		}},
		{"unknown cas not applied", []Record{
			hRec(0, hPut("a", "1"), hOK(1), 0, 1),
			hRec(0, hCAS("a", 1, "2"), hUnknown, 4, 5),
			hRec(1, hGet("a"), hGot("1", 1), 10, 11),
			hRec(1, hCAS("a", 1, "3"), hOK(9), 12, 13),
			hRec(1, hGet("a"), hGot("3", 9), 14, 15),
		}},
		{"unknown cas on a version of unknown revision", []Record{
			hRec(0, hPut("a", "1"), hUnknown, 0, 1),
			hRec(1, hCAS("a", 4, "2"), hUnknown, 2, 3),
			hRec(2, hGet("a"), hGot("2", 9), 10, 11),
		}},
		{"cas ok on a version of unknown revision", []Record{
			hRec(0, hPut("a", "1"), hOK(1), 0, 1),
			hRec(0, hPut("a", "2"), hUnknown, 2, 3),
			hRec(1, hCAS("a", 4, "3"), hOK(6), 4, 5),
			hRec(1, hGet("a"), hGot("3", 6), 6, 7),
		}},
		{"cas if@0 creates an absent document", []Record{
			hRec(0, hCAS("a", 0, "1"), hOK(2), 0, 1),
			hRec(1, hCAS("a", 0, "2"), hPrecond, 2, 3),
			hRec(1, hGet("a"), hGot("1", 2), 4, 5),
			hRec(1, hDel("a"), hOK(3), 6, 7),
			hRec(1, hCAS("a", 2, "3"), hPrecond, 8, 9),
			hRec(1, hCAS("a", 0, "4"), hUnknown, 10, 11),
			hRec(2, hGet("a"), hGot("4", 9), 12, 13),
		}},
		{"unknown delete applied", []Record{
			hRec(0, hPut("a", "1"), hOK(1), 0, 1),
			hRec(0, hDel("a"), hUnknown, 2, 3),
			hRec(1, hGet("a"), hNotFound, 10, 11),
			hRec(1, hPut("a", "2"), hOK(4), 12, 13),
		}},
		{"unknown delete not applied", []Record{
			hRec(0, hPut("a", "1"), hOK(1), 0, 1),
			hRec(0, hDel("a"), hUnknown, 2, 3),
			hRec(1, hGet("a"), hGot("1", 1), 10, 11),
		}},
		{"failed put whose value never shows up", []Record{
			hRec(0, hPut("a", "1"), hOK(1), 0, 1),
			hRec(0, hPut("a", "2"), hFailed, 2, 3),
			hRec(1, hGet("a"), hGot("1", 1), 10, 11),
		}},
		{"reads that did not answer say nothing", []Record{
			hRec(0, hPut("a", "1"), hOK(1), 0, 1),
			{Client: 1, Input: hGet("a"), Output: Output{Outcome: OutFailed, Value: "garbage", Rev: 99}, Call: 2, Return: 3},
			{Client: 1, Input: hGet("a"), Output: Output{Outcome: OutUnknown, Value: "garbage", Rev: 99}, Call: 4, Return: 5},
			hRec(1, hGet("a"), hGot("1", 1), 6, 7),
		}},
	}, legalAccessHistories()...)
}

// legalAccessHistories are histories of a guarded key: writers' writes
// racing grants and revokes (rules or role changes) of the key's project.
func legalAccessHistories() []modelHistoryCase {
	return []modelHistoryCase{
		{"sequential revoke, 403, grant, write", []Record{
			hRec(0, hPut("g", "1"), hOK(1), 0, 1),
			hRec(1, hRevoke("g"), hOK(2), 2, 3),
			hRec(0, hPut("g", "2"), hForbidden, 4, 5),
			hRec(0, hBatch("g", "3"), hForbidden, 6, 7),
			hRec(1, hGet("g"), hGot("1", 1), 8, 9),
			hRec(0, hCAS("g", 1, "4"), hForbidden, 10, 11),
			hRec(0, hDel("g"), hForbidden, 12, 13),
			hRec(1, hGrant("g"), hOK(8), 14, 15),
			hRec(0, hCAS("g", 1, "5"), hOK(9), 16, 17),
			hRec(0, hBatch("g", "6"), hOK(10), 18, 19),
			hRec(1, hGet("g"), hGot("6", 10), 20, 21),
			hRec(0, hBatchCAS("g", 9, "7"), hPrecond, 22, 23),
			hRec(0, hBatchCAS("g", 10, "7"), hOK(12), 24, 25),
			hRec(0, hDel("g"), hOK(13), 26, 27),
			hRec(0, hDel("g"), hNotFound, 28, 29),
		}},
		{"write overlapping a revoke commits before it", []Record{
			hRec(1, hRevoke("g"), hOK(5), 0, 10),
			hRec(0, hPut("g", "1"), hOK(3), 1, 9),
			hRec(1, hGet("g"), hGot("1", 3), 11, 12),
		}},
		{"write overlapping a revoke refused", []Record{
			hRec(1, hRevoke("g"), hOK(5), 0, 10),
			hRec(0, hPut("g", "1"), hForbidden, 1, 9),
			hRec(0, hPut("g", "2"), hForbidden, 11, 12),
		}},
		{"write ending after a revoke ended, committed before it", []Record{
			hRec(1, hRevoke("g"), hOK(5), 0, 2),
			hRec(0, hPut("g", "1"), hOK(4), 1, 3),
			hRec(1, hGet("g"), hGot("1", 4), 4, 5),
		}},
		{"403 overlapping a grant, write committed after it", []Record{
			hRec(1, hRevoke("g"), hOK(2), 0, 1),
			hRec(1, hGrant("g"), hOK(4), 2, 10),
			hRec(0, hPut("g", "1"), hForbidden, 3, 9),
			hRec(2, hPut("g", "2"), hOK(6), 3, 11),
		}},
		{"writes between a revoke and a grant by revision", []Record{
			hRec(1, hRevoke("g"), hOK(5), 0, 20),
			hRec(1, hGrant("g"), hOK(8), 21, 40),
			hRec(0, hPut("g", "1"), hOK(3), 1, 39),
			hRec(2, hPut("g", "2"), hForbidden, 1, 39),
			hRec(3, hPut("g", "3"), hOK(9), 1, 41),
			hRec(3, hGet("g"), hGot("3", 9), 42, 43),
		}},
		{"unknown revoke not applied, then applied", []Record{
			hRec(1, hRevoke("g"), hUnknown, 0, 1),
			hRec(0, hPut("g", "1"), hOK(3), 2, 3),
			hRec(0, hPut("g", "2"), hForbidden, 4, 5),
			hRec(0, hPut("g", "3"), hForbidden, 6, 7),
		}},
		{"unknown revoke never applied", []Record{
			hRec(1, hRevoke("g"), hUnknown, 0, 1),
			hRec(0, hPut("g", "1"), hOK(3), 2, 3),
			hRec(0, hPut("g", "2"), hOK(4), 4, 5),
		}},
		{"unknown grant applied between two writes", []Record{
			hRec(1, hRevoke("g"), hOK(1), 0, 1),
			hRec(1, hGrant("g"), hUnknown, 2, 3),
			hRec(0, hPut("g", "1"), hForbidden, 4, 5),
			hRec(0, hPut("g", "2"), hOK(7), 6, 7),
		}},
		{"unknown write while denied does not apply", []Record{
			hRec(1, hRevoke("g"), hOK(1), 0, 1),
			hRec(0, hPut("g", "1"), hUnknown, 2, 3),
			hRec(1, hGet("g"), hNotFound, 4, 5),
			hRec(1, hGrant("g"), hOK(6), 6, 7),
			hRec(1, hGet("g"), hNotFound, 8, 9),
		}},
		{"unknown write applies once granted again", []Record{
			hRec(1, hRevoke("g"), hOK(1), 0, 1),
			hRec(0, hBatch("g", "1"), hUnknown, 2, 3),
			hRec(1, hGet("g"), hNotFound, 4, 5),
			hRec(1, hGrant("g"), hOK(6), 6, 7),
			hRec(1, hGet("g"), hGot("1", 9), 8, 9),
		}},
		{"revoke over a version of unknown revision", []Record{
			hRec(0, hPut("g", "1"), hOK(1), 0, 1),
			hRec(0, hPut("g", "2"), hUnknown, 2, 3),
			hRec(1, hRevoke("g"), hOK(6), 4, 5),
			hRec(1, hGet("g"), hGot("2", 4), 6, 7),
			hRec(1, hGrant("g"), hOK(8), 8, 9),
			hRec(1, hCAS("g", 4, "3"), hOK(10), 10, 11),
		}},
		{"failed access changes say nothing", []Record{
			hRec(1, hRevoke("g"), hFailed, 0, 1),
			hRec(0, hPut("g", "1"), hOK(3), 2, 3),
			hRec(1, hGrant("g"), hOK(4), 4, 5),
			hRec(1, hGrant("g"), hOK(5), 6, 7),
			hRec(0, hPut("g", "2"), hOK(6), 8, 9),
		}},
	}
}

func illegalModelHistories() []modelHistoryCase {
	return append([]modelHistoryCase{
		{"stale read", []Record{
			hRec(0, hPut("a", "1"), hOK(1), 0, 1),
			hRec(0, hPut("a", "2"), hOK(2), 2, 3),
			hRec(1, hGet("a"), hGot("1", 1), 4, 5),
		}},
		{"read of a value nobody wrote", []Record{
			hRec(0, hPut("a", "1"), hOK(1), 0, 1),
			hRec(1, hGet("a"), hGot("ghost", 2), 2, 3),
		}},
		{"read of a value whose put failed", []Record{
			hRec(0, hPut("a", "1"), hFailed, 0, 1),
			hRec(1, hGet("a"), hGot("1", 1), 2, 3),
		}},
		{"revision going backwards", []Record{
			hRec(0, hPut("a", "1"), hOK(5), 0, 1),
			hRec(1, hPut("a", "2"), hOK(3), 2, 3),
		}},
		{"read revision differs from the write's", []Record{
			hRec(0, hPut("a", "1"), hOK(1), 0, 1),
			hRec(1, hGet("a"), hGot("1", 2), 2, 3),
		}},
		{"cas ok on an overwritten revision", []Record{
			hRec(0, hPut("a", "1"), hOK(1), 0, 1),
			hRec(0, hGet("a"), hGot("1", 1), 2, 3),
			hRec(1, hPut("a", "2"), hOK(2), 4, 5),
			hRec(0, hCAS("a", 1, "3"), hOK(3), 6, 7),
		}},
		{"cas precondition failed although the revision matched", []Record{
			hRec(0, hPut("a", "1"), hOK(1), 0, 1),
			hRec(0, hCAS("a", 1, "2"), hPrecond, 2, 3),
		}},
		{"get notfound after a completed put", []Record{
			hRec(0, hPut("a", "1"), hOK(1), 0, 1),
			hRec(1, hGet("a"), hNotFound, 2, 3),
		}},
		{"read of a deleted value", []Record{
			hRec(0, hPut("a", "1"), hOK(1), 0, 1),
			hRec(0, hDel("a"), hOK(2), 2, 3),
			hRec(1, hGet("a"), hGot("1", 1), 4, 5),
		}},
		{"delete ok on an absent key", []Record{
			hRec(0, hDel("a"), hOK(1), 0, 1),
		}},
		{"unknown put shows up and then disappears", []Record{
			hRec(0, hPut("a", "1"), hOK(1), 0, 1),
			hRec(0, hPut("a", "2"), hUnknown, 2, 3),
			hRec(1, hGet("a"), hGot("2", 4), 4, 5),
			hRec(1, hGet("a"), hGot("1", 1), 6, 7),
		}},
		{"unknown cas on an overwritten revision shows up", []Record{
			hRec(0, hPut("a", "1"), hOK(1), 0, 1),
			hRec(0, hPut("a", "2"), hOK(2), 2, 3),
			hRec(1, hCAS("a", 1, "3"), hUnknown, 4, 5),
			hRec(1, hGet("a"), hGot("3", 7), 10, 11),
		}},
		{"revision going backwards after a read revealed an unknown write's", []Record{
			hRec(0, hPut("a", "1"), hUnknown, 0, 1),
			hRec(1, hGet("a"), hGot("1", 4), 2, 3),
			hRec(1, hPut("a", "2"), hOK(3), 4, 5),
		}},
		{"cas revision not above its If-Match", []Record{
			hRec(0, hPut("a", "1"), hUnknown, 0, 1),
			hRec(1, hCAS("a", 4, "2"), hOK(3), 2, 3),
		}},
		{"cas ok on an unknown version with an If-Match older than the floor", []Record{
			hRec(0, hPut("a", "1"), hOK(5), 0, 1),
			hRec(0, hPut("a", "2"), hUnknown, 2, 3),
			hRec(1, hCAS("a", 3, "3"), hOK(8), 4, 5),
		}},
		{"cas ok on an absent key", []Record{
			hRec(0, hCAS("a", 5, "1"), hOK(6), 0, 1),
		}},
		{"cas if@0 ok on a present document", []Record{
			hRec(0, hPut("a", "1"), hOK(1), 0, 1),
			hRec(1, hCAS("a", 0, "2"), hOK(2), 2, 3),
		}},
		{"cas if@0 on an absent key refused", []Record{
			hRec(0, hCAS("a", 0, "1"), hPrecond, 0, 1),
		}},
		{"cas if@0 on an absent key not found", []Record{
			hRec(0, hCAS("a", 0, "1"), hNotFound, 0, 1),
		}},
		{"cas not found on a present document", []Record{
			hRec(0, hPut("a", "1"), hOK(1), 0, 1),
			hRec(1, hCAS("a", 7, "2"), hNotFound, 2, 3),
		}},
		{"unknown write's revision below an earlier completed one", []Record{
			hRec(0, hPut("a", "1"), hOK(5), 0, 1),
			hRec(0, hPut("a", "2"), hUnknown, 2, 3),
			hRec(1, hGet("a"), hGot("2", 4), 4, 5),
		}},
	}, illegalAccessHistories()...)
}

// illegalAccessHistories are histories of a guarded key that no order of
// the operations explains. Each one's last record is the culprit: without
// it the history is legal (TestModelIllegalAccessHistoriesCulprit).
func illegalAccessHistories() []modelHistoryCase {
	return []modelHistoryCase{
		{"write ok strictly after a completed revoke", []Record{
			hRec(1, hRevoke("g"), hOK(2), 0, 1),
			hRec(0, hPut("g", "1"), hOK(3), 2, 3),
		}},
		{"batch ok strictly after a completed revoke", []Record{
			hRec(1, hRevoke("g"), hOK(2), 0, 1),
			hRec(0, hBatch("g", "1"), hOK(3), 2, 3),
		}},
		{"cas ok strictly after a completed revoke", []Record{
			hRec(0, hPut("g", "1"), hOK(1), 0, 1),
			hRec(1, hRevoke("g"), hOK(2), 2, 3),
			hRec(0, hCAS("g", 1, "2"), hOK(4), 4, 5),
		}},
		{"delete ok strictly after a completed revoke", []Record{
			hRec(0, hPut("g", "1"), hOK(1), 0, 1),
			hRec(1, hRevoke("g"), hOK(2), 2, 3),
			hRec(0, hDel("g"), hOK(4), 4, 5),
		}},
		{"403 strictly after a completed grant with no revoke between", []Record{
			hRec(1, hRevoke("g"), hOK(1), 0, 1),
			hRec(1, hGrant("g"), hOK(2), 2, 3),
			hRec(0, hPut("g", "1"), hForbidden, 4, 5),
		}},
		{"403 with no access change at all", []Record{
			hRec(0, hPut("g", "1"), hForbidden, 0, 1),
		}},
		{"write committed after an overlapping revoke", []Record{
			// The intervals overlap, but revision 6 is after the revoke's 5
			// in the log: the write was judged under the revoke.
			hRec(1, hRevoke("g"), hOK(5), 0, 10),
			hRec(0, hPut("g", "1"), hOK(6), 1, 9),
		}},
		{"write committed between a revoke and a grant", []Record{
			hRec(1, hRevoke("g"), hOK(5), 0, 1),
			hRec(1, hGrant("g"), hOK(8), 2, 10),
			hRec(0, hPut("g", "1"), hOK(6), 3, 9),
		}},
		{"412 while writes are denied", []Record{
			// Access is judged before the revision: a writer without access
			// learns nothing of the document.
			hRec(1, hRevoke("g"), hOK(1), 0, 1),
			hRec(0, hCAS("g", 9, "1"), hPrecond, 2, 3),
		}},
		{"404 while writes are denied", []Record{
			hRec(1, hRevoke("g"), hOK(1), 0, 1),
			hRec(0, hDel("g"), hNotFound, 2, 3),
		}},
		{"unknown write while denied shows up", []Record{
			hRec(1, hRevoke("g"), hOK(1), 0, 1),
			hRec(0, hPut("g", "1"), hUnknown, 2, 3),
			hRec(1, hGet("g"), hGot("1", 4), 4, 5),
		}},
		{"access change answered 403", []Record{
			hRec(1, hGrant("g"), hForbidden, 0, 1),
		}},
		{"read answered 403", []Record{
			hRec(1, hGet("g"), hForbidden, 0, 1),
		}},
		{"access change revision not above an earlier write's", []Record{
			hRec(0, hPut("g", "1"), hOK(5), 0, 1),
			hRec(1, hRevoke("g"), hOK(3), 2, 3),
		}},
		{"write revision not above an earlier grant's", []Record{
			hRec(1, hRevoke("g"), hOK(1), 0, 1),
			hRec(1, hGrant("g"), hOK(5), 2, 3),
			hRec(0, hPut("g", "1"), hOK(4), 4, 5),
		}},
		{"read of a torn batch", []Record{
			// A batch sets v to "1~half", then updates it to "1": a read of
			// the first half is a value no write left.
			hRec(0, hBatch("g", "1"), hOK(3), 0, 1),
			hRec(1, hGet("g"), hGot("1~half", 3), 2, 3),
		}},
	}
}

func TestModelLegalHistories(t *testing.T) {
	for _, tc := range legalModelHistories() {
		t.Run(tc.name, func(t *testing.T) {
			res, _ := Check(tc.recs, 5*time.Second)
			if res != porcupine.Ok {
				t.Fatalf("Check = %s, want Ok", res)
			}
		})
	}
}

func TestModelIllegalHistories(t *testing.T) {
	for _, tc := range illegalModelHistories() {
		t.Run(tc.name, func(t *testing.T) {
			res, _ := Check(tc.recs, 5*time.Second)
			if res != porcupine.Illegal {
				t.Fatalf("Check = %s, want Illegal", res)
			}
		})
	}
}

// TestModelIllegalAccessHistoriesCulprit makes each illegal access history
// fail for the reason its name gives: without its last record it is legal.
func TestModelIllegalAccessHistoriesCulprit(t *testing.T) {
	for _, tc := range illegalAccessHistories() {
		t.Run(tc.name, func(t *testing.T) {
			res, _ := Check(tc.recs[:len(tc.recs)-1], 5*time.Second)
			if res != porcupine.Ok {
				t.Fatalf("without its last record: Check = %s, want Ok", res)
			}
		})
	}
}

// withKey returns recs with every key replaced and clients shifted, so
// histories can be combined.
func historyWithKey(recs []Record, key string, clientOffset int) []Record {
	out := slices.Clone(recs)
	for i := range out {
		out[i].Input.Key = key
		out[i].Client += clientOffset
	}
	return out
}

func TestModelPartitionIllegalKeyAmongLegal(t *testing.T) {
	var legal []Record
	for i, tc := range legalModelHistories() {
		legal = append(legal, historyWithKey(tc.recs, fmt.Sprintf("ok%d", i), 4*i)...)
	}
	if n := len(Model().Partition(Operations(legal))); n != len(legalModelHistories()) {
		t.Fatalf("partitions = %d, want one per key (%d)", n, len(legalModelHistories()))
	}
	if res, _ := Check(legal, 5*time.Second); res != porcupine.Ok {
		t.Fatalf("legal keys together: Check = %s, want Ok", res)
	}
	for _, bad := range illegalModelHistories() {
		t.Run(bad.name, func(t *testing.T) {
			recs := slices.Concat(legal, historyWithKey(bad.recs, "bad", 1000))
			res, info := Check(recs, 5*time.Second)
			if res != porcupine.Illegal {
				t.Fatalf("Check = %s, want Illegal", res)
			}
			if n := len(info.PartialLinearizations()); n != len(legalModelHistories())+1 {
				t.Fatalf("linearization info covers %d partitions, want %d", n, len(legalModelHistories())+1)
			}
		})
	}
}

func TestModelPartitionEvents(t *testing.T) {
	m := Model()
	evs := []porcupine.Event{
		{Kind: porcupine.CallEvent, Value: hPut("a", "1"), Id: 0},
		{Kind: porcupine.CallEvent, Value: hPut("b", "1"), Id: 1},
		{Kind: porcupine.ReturnEvent, Value: hOK(1), Id: 0},
		{Kind: porcupine.CallEvent, Value: hGet("b"), Id: 2},
		{Kind: porcupine.ReturnEvent, Value: hOK(2), Id: 1},
		{Kind: porcupine.ReturnEvent, Value: hGot("1", 2), Id: 2},
	}
	parts := m.PartitionEvent(evs)
	if len(parts) != 2 || len(parts[0]) != 2 || len(parts[1]) != 4 {
		t.Fatalf("partitions = %v", parts)
	}
	if !porcupine.CheckEvents(m, evs) {
		t.Fatal("legal event history rejected")
	}
	evs[5].Value = hGot("1", 1)
	if porcupine.CheckEvents(m, evs) {
		t.Fatal("event history with a wrong read revision accepted")
	}
}

// simulate produces a linearizable history: each client runs its
// operations one after another with random latencies; every operation takes
// effect at a random point inside its interval, and the outcomes come from
// applying the operations to a sequential store in that order. Some writes
// fail or have an unknown outcome (applied or not). With access, one
// operation in eight is a grant or revoke of its key, some puts and cas
// are batches, and a write to a key whose writers are denied is answered
// 403 (or fails, or has an unknown outcome, never applied).
func simulateHistory(seed uint64, clients, perClient, keys int, access bool) []Record {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	type op struct {
		rec Record
		lin int64
	}
	var ops []op
	for c := range clients {
		var now int64
		for range perClient {
			call := now + 1 + rng.Int64N(40)
			lin := call + rng.Int64N(60)
			ret := lin + rng.Int64N(60)
			now = ret
			// Scale and add the client so linearization points are distinct.
			s := int64(clients)
			ops = append(ops, op{Record{Client: c, Node: fmt.Sprintf("n%d", c%3), Call: call*s + int64(c), Return: ret*s + int64(c)}, lin*s + int64(c)})
		}
	}
	slices.SortFunc(ops, func(a, b op) int { return cmp.Compare(a.lin, b.lin) })

	type doc struct {
		present bool
		value   string
		rev     uint64
	}
	store := map[string]doc{}
	denied := map[string]bool{}
	var rev uint64
	seq := 0
	// write applies a write's effect and picks its outcome.
	write := func(r *Record, apply func()) {
		switch roll := rng.IntN(100); {
		case roll < 2:
			r.Output = hFailed
			r.Err = "connection refused"
		case roll < 3:
			r.Output = hUnknown
			r.Err = "timeout (not applied)"
		case roll < 4:
			apply()
			r.Output = hUnknown
			r.Err = "timeout (applied)"
		default:
			apply()
			r.Output = hOK(rev)
		}
	}
	// refused is a write to a key whose writers are denied: it takes a
	// revision (the refused entry's) and applies nothing.
	refused := func(r *Record) {
		switch roll := rng.IntN(100); {
		case roll < 2:
			r.Output = hFailed
		case roll < 4:
			r.Output = hUnknown
		default:
			rev++
			r.Output = hForbidden
		}
	}
	for i := range ops {
		r := &ops[i].rec
		key := fmt.Sprintf("k%d", rng.IntN(keys))
		d := store[key]
		if access && rng.IntN(8) == 0 {
			r.Input = hGrant(key)
			if rng.IntN(2) == 0 {
				r.Input = hRevoke(key)
			}
			write(r, func() { rev++; denied[key] = r.Input.Kind == OpRevoke })
			continue
		}
		batch := access && rng.IntN(3) == 0
		switch roll := rng.IntN(10); {
		case roll < 3:
			seq++
			r.Input = hPut(key, fmt.Sprintf("v%d", seq))
			r.Input.Batch = batch
			if denied[key] {
				refused(r)
			} else {
				write(r, func() { rev++; store[key] = doc{true, r.Input.Value, rev} })
			}
		case roll < 7:
			r.Input = hGet(key)
			switch {
			case rng.IntN(100) < 2:
				r.Output = Output{Outcome: OutUnknown, Value: "garbage"}
			case d.present:
				r.Output = hGot(d.value, d.rev)
			default:
				r.Output = hNotFound
			}
		case roll < 9:
			ifRev := d.rev
			if rng.IntN(3) == 0 && rev > 0 {
				ifRev = 1 + rng.Uint64N(rev)
			}
			seq++
			r.Input = hCAS(key, ifRev, fmt.Sprintf("v%d", seq))
			r.Input.Batch = batch
			// Access is judged first. The server compares If-Match with
			// the current revision, 0 when absent: If-Match 0 creates a
			// missing document.
			switch {
			case denied[key]:
				refused(r)
			case d.rev != ifRev:
				r.Output = hPrecond
			default:
				write(r, func() { rev++; store[key] = doc{true, r.Input.Value, rev} })
			}
		default:
			r.Input = hDel(key)
			switch {
			case denied[key]:
				refused(r)
			case d.present:
				write(r, func() { rev++; store[key] = doc{} })
			default:
				r.Output = hNotFound
			}
		}
	}
	recs := make([]Record, len(ops))
	for i, o := range ops {
		recs[i] = o.rec
	}
	// Record order is irrelevant to the checker: shuffle it.
	rng.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
	return recs
}

func TestModelSimulatedHistories(t *testing.T) {
	for seed := range uint64(20) {
		recs := simulateHistory(seed, 4, 60, 2, false)
		if res, _ := Check(recs, 10*time.Second); res != porcupine.Ok {
			t.Fatalf("seed %d: Check = %s, want Ok", seed, res)
		}
	}
}

func TestModelSimulatedAccessHistories(t *testing.T) {
	var forbidden, access int
	for seed := range uint64(20) {
		recs := simulateHistory(seed, 4, 60, 2, true)
		for _, r := range recs {
			switch {
			case r.Output.Outcome == OutForbidden:
				forbidden++
			case r.Input.Kind == OpGrant || r.Input.Kind == OpRevoke:
				access++
			}
		}
		if res, _ := Check(recs, 10*time.Second); res != porcupine.Ok {
			t.Fatalf("seed %d: Check = %s, want Ok", seed, res)
		}
	}
	if forbidden == 0 || access == 0 {
		t.Fatalf("simulation too tame: %d access changes, %d writes answered 403", access, forbidden)
	}
	t.Logf("20 histories: %d access changes, %d writes answered 403", access, forbidden)

	// A fault run's size checks in well under its timeout.
	recs := simulateHistory(42, 8, 300, 5, true)
	start := time.Now()
	if res, _ := Check(recs, 20*time.Second); res != porcupine.Ok {
		t.Fatalf("big history: Check = %s, want Ok", res)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("big history: Check took %v", d)
	}
	t.Logf("%d records with access changes checked in %v", len(recs), time.Since(start))
}

func TestModelCheckBigHistory(t *testing.T) {
	recs := simulateHistory(42, 8, 300, 5, false)
	var unknowns, cas int
	for _, r := range recs {
		if r.Output.Outcome == OutUnknown && r.Input.Kind != OpGet {
			unknowns++
		}
		if r.Input.Kind == OpCAS && r.Output.Outcome == OutOK {
			cas++
		}
	}
	if unknowns == 0 || cas == 0 {
		t.Fatalf("simulation too tame: %d unknown writes, %d successful cas", unknowns, cas)
	}
	start := time.Now()
	res, _ := Check(recs, 20*time.Second)
	if res != porcupine.Ok {
		t.Fatalf("Check = %s, want Ok", res)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Check took %v", d)
	}
	t.Logf("%d records (%d unknown writes, %d cas ok) checked in %v", len(recs), unknowns, cas, time.Since(start))

	// The same history with one late read corrupted must be rejected.
	last := -1
	for i, r := range recs {
		if r.Input.Kind == OpGet && r.Output.Outcome == OutOK && (last < 0 || r.Call > recs[last].Call) {
			last = i
		}
	}
	bad := slices.Clone(recs)
	bad[last].Output.Value = "ghost"
	if res, _ := Check(bad, 20*time.Second); res != porcupine.Illegal {
		t.Fatalf("corrupted read: Check = %s, want Illegal", res)
	}
}

func TestCheckTimeout(t *testing.T) {
	// Forty overlapping puts of unknown outcome and a read of a value none
	// of them wrote: the checker must try every subset of the puts before
	// the read, far more than it can in the timeout.
	var recs []Record
	for i := range 40 {
		recs = append(recs, hRec(i, hPut("a", fmt.Sprintf("v%d", i)), hUnknown, int64(i), int64(i+1)))
	}
	recs = append(recs, hRec(40, hGet("a"), hGot("ghost", 1), 100, 101))
	start := time.Now()
	res, info := Check(recs, 100*time.Millisecond)
	elapsed := time.Since(start)
	if res != porcupine.Unknown {
		t.Fatalf("Check = %s, want Unknown (timeout)", res)
	}
	if elapsed > 5*time.Second {
		t.Fatalf("Check returned after %v, the timeout was 100ms", elapsed)
	}
	// A timed-out check is still reportable.
	paths, err := WriteReport(t.TempDir(), recs, info)
	if err != nil || len(paths) != 2 {
		t.Fatalf("WriteReport after a timeout = %v, %v; want both files", paths, err)
	}
}

func TestModelOperations(t *testing.T) {
	recs := []Record{
		hRec(0, hPut("a", "1"), hOK(1), 10, 20),
		hRec(0, hPut("a", "2"), hUnknown, 30, 40),
		hRec(0, hGet("a"), hGot("1", 1), 50, 60),
		hRec(1, hPut("a", "3"), hFailed, 5, 6),
		hRec(1, hGet("a"), hUnknown, 7, 8),
		hRec(1, hGet("a"), hFailed, 9, 500),
		hRec(2, hDel("a"), hUnknown, 11, 12),
	}
	ops := Operations(recs)
	if len(ops) != 4 {
		t.Fatalf("got %d operations, want 4 (failed writes and unanswered reads dropped): %+v", len(ops), ops)
	}
	type want struct {
		client    int
		call, ret int64
		in        Input
	}
	wants := []want{
		{0, 10, 20, hPut("a", "1")},
		{2, 11, 501, hDel("a")},
		{0, 30, 501, hPut("a", "2")},
		{4, 50, 60, hGet("a")},
	}
	for i, w := range wants {
		op := ops[i]
		if op.ClientId != w.client || op.Call != w.call || op.Return != w.ret || op.Input.(Input) != w.in {
			t.Errorf("op %d = client %d [%d,%d] %+v, want client %d [%d,%d] %+v",
				i, op.ClientId, op.Call, op.Return, op.Input, w.client, w.call, w.ret, w.in)
		}
	}
	if m, ok := ops[1].Metadata.(opMeta); !ok || m.Index != 6 || m.Client != 2 || m.Node != "n2" {
		t.Errorf("metadata = %#v", ops[1].Metadata)
	}
}

func TestModelDescribe(t *testing.T) {
	m := Model()
	for _, tc := range []struct {
		in   Input
		out  Output
		want string
	}{
		{hPut("k", "v"), hOK(17), "put k=v → ok@17"},
		{hGet("k"), hGot("v", 17), "get k → v@17"},
		{hGet("k"), hNotFound, "get k → 404"},
		{hCAS("k", 12, "v"), hPrecond, "cas k if@12 =v → 412"},
		{hCAS("k", 12, "v"), hUnknown, "cas k if@12 =v → ? (unknown)"},
		{hDel("k"), hOK(20), "delete k → ok@20"},
		{hBatch("k", "v"), hForbidden, "batch put k=v → 403"},
		{hBatchCAS("k", 0, "v"), hOK(21), "batch cas k if@0 =v → ok@21"},
		{hRevoke("k"), hOK(22), "revoke k → ok@22"},
		{hGrant("k"), hUnknown, "grant k → ? (unknown)"},
	} {
		if got := m.DescribeOperation(tc.in, tc.out); got != tc.want {
			t.Errorf("DescribeOperation = %q, want %q", got, tc.want)
		}
	}
	_, s := m.Step(m.Init(), hPut("k", "v"), hOK(17))
	if got, want := m.DescribeState(s), `{"v"@17 (floor 17)}`; got != want {
		t.Errorf("DescribeState = %q, want %q", got, want)
	}
	_, s = m.Step(s, hPut("k", "w"), hUnknown)
	if got, want := m.DescribeState(s), `{"w"@? (floor 17)}`; got != want {
		t.Errorf("DescribeState = %q, want %q", got, want)
	}
	_, s = m.Step(m.Init(), hRevoke("k"), hOK(3))
	if got, want := m.DescribeState(s), `{absent (floor 3, writes denied)}`; got != want {
		t.Errorf("DescribeState = %q, want %q", got, want)
	}
}

func TestModelRecordJSONRoundTrip(t *testing.T) {
	recs := []Record{
		hRec(0, hCAS("a", 3, "x"), hPrecond, 1, 2),
		hRec(2, hBatch("g", "y"), hForbidden, 3, 4),
		hRec(3, hRevoke("g"), hOK(7), 5, 6),
		{Client: 1, Input: Input{Kind: OpKind(9), Key: "b"}, Output: Output{Outcome: Outcome(0)}, Err: "boom"},
	}
	b, err := json.Marshal(recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"Kind":"cas"`, `"Outcome":"precondition"`, `"Kind":"revoke"`, `"Outcome":"forbidden"`, `"Batch":true`} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("enums or Batch not readable: %s not in %s", want, b)
		}
	}
	if strings.Count(string(b), `"Batch"`) != 1 {
		t.Fatalf("Batch written where it is false: %s", b)
	}
	var back []Record
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, recs) {
		t.Fatalf("round trip: got %+v, want %+v", back, recs)
	}
	var k OpKind
	if err := k.UnmarshalText([]byte("frobnicate")); err == nil {
		t.Fatal("bad op kind accepted")
	}
}

func TestReportWritesHistoryAndVisualisation(t *testing.T) {
	recs := slices.Concat(
		historyWithKey(legalModelHistories()[0].recs, "alpha", 0),
		historyWithKey(illegalModelHistories()[0].recs, "beta", 10),
	)
	res, info := Check(recs, 5*time.Second)
	if res != porcupine.Illegal {
		t.Fatalf("Check = %s, want Illegal", res)
	}
	dir := filepath.Join(t.TempDir(), "run", "report")
	paths, err := WriteReport(dir, recs, info)
	if err != nil {
		t.Fatal(err)
	}
	wantPaths := []string{filepath.Join(dir, "history.json"), filepath.Join(dir, "linearizability.html")}
	if !slices.Equal(paths, wantPaths) {
		t.Fatalf("paths = %v, want %v", paths, wantPaths)
	}
	html, err := os.ReadFile(wantPaths[1])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"alpha", "beta", "put alpha=1", "cas alpha if@1 =2"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("visualisation lacks %q", want)
		}
	}
	hist, err := os.ReadFile(wantPaths[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(hist), "\n  {\n    \"Client\"") {
		t.Errorf("history.json not indented:\n%.200s", hist)
	}
	var back []Record
	if err := json.Unmarshal(hist, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, recs) {
		t.Fatalf("history.json round trip differs")
	}
}

func TestReportWithoutInfo(t *testing.T) {
	dir := t.TempDir()
	paths, err := WriteReport(dir, nil, porcupine.LinearizationInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 1 || paths[0] != filepath.Join(dir, "history.json") {
		t.Fatalf("paths = %v", paths)
	}
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(b)) != "[]" {
		t.Fatalf("history.json = %q, want []", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "linearizability.html")); !os.IsNotExist(err) {
		t.Fatalf("linearizability.html written without info (stat: %v)", err)
	}
}
