// Package triggers runs apps' triggers: owner-declared reactions to the
// ordered change feed (a webhook, a push notification, a derived write).
//
// Definitions, progress (a committed cursor per trigger), parked events
// (failed once, waiting for a retry, and the events of the same document
// queued behind them) and dead letters all live in the replicated tree
// (keys: Trigger, TriggerState, TriggerQueueDir, TriggerDeadDir,
// TriggerIndex), so the next leader resumes where the last one stopped.
//
// Delivery is at-least-once, in revision order per document path and in
// parallel across paths. The leader alone runs deliveries (Runner.Run,
// started by node's leader duties); any node serves the owner API
// (Service).
package triggers
