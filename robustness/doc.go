// Package robustness proves edgebase's promises under faults, the way etcd's
// robustness suite and Jepsen do: it runs a real cluster (three voters and
// one edge node, each its own OS process on loopback), drives concurrent
// clients pinned to different nodes while one fault is injected (kill -9,
// SIGSTOP past the election timeout, a network partition, a follower cut
// off until it must install a snapshot, a restart of every node), records
// every operation with its invoke and return times and outcome, and checks:
//
//   - the history of puts, strong gets, conditional puts and deletes is
//     linearizable (porcupine, per key, a write of unknown outcome may or may
//     not have taken effect, a checker timeout is a failure);
//   - on guarded keys, each in a project of its own whose owner grants and
//     revokes a writer again and again (by the rules, or by the writer's
//     role) while the writer puts, batches and deletes through random
//     nodes, no write commits under a rule or role that no longer held at
//     its commit, and no write is refused (403) where its access held: the
//     model orders access changes and writes by revision;
//   - no acknowledged write is missing once the fault heals, and every node
//     converges to the same documents, byte for byte;
//   - strong queries through every node during the fault (paged with
//     cursors, served by a declared index) return every create acknowledged
//     before they started, each once and in order; once healed, every
//     node's query answers exactly its listing (querycheck.go);
//   - realtime streams on every node deliver strictly increasing revisions
//     with no gap and no duplicate against the union of all streams, the
//     same event for the same revision everywhere, and a resume with `since`
//     returns exactly what followed;
//   - push: every due notification reaches every device at least once across
//     a leader kill, with duplicates only around the leadership change;
//   - mail: every acknowledged email reaches the SMTP server at least once
//     across a leader kill with messages on the wire (duplicates counted);
//   - triggers: every committed change a webhook trigger matches reaches a
//     real receiver (internal/hookcheck, which checks each signature) at
//     least once across a leader kill, pause or partition, first deliveries
//     in revision order per path, duplicates only around a leadership change
//     (triggercheck.go settles the changes from the writes).
//
// The model and the checkers are plain code (model.go, streams.go,
// pushcheck.go, mailcheck.go, triggercheck.go) with their own tests; the fault runs are in the _test files
// (the access workload in access_test.go).
// docs/robustness.md describes the faults, the checks, the results and the
// guarantees they support.
package robustness
