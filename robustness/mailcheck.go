package robustness

import (
	"fmt"
	"maps"
	"slices"
)

// MailRequest is one request that queues an email (request-password-reset
// for one address) and what it answered: Acked (200: the email was
// committed to the outbox) or not (an error, or no answer: it may or may
// not have been queued).
type MailRequest struct {
	To    string `json:"to"`
	Node  string `json:"node"`
	Acked bool   `json:"acked"`
	Err   string `json:"err,omitempty"`
}

// MailReport summarises a mail delivery check.
type MailReport struct {
	Acked      int      // addresses whose request was acknowledged
	Delivered  int      // acknowledged addresses that got their email at least once
	Lost       []string // acknowledged addresses that got nothing
	Duplicates int      // extra copies (an address served 3 times counts 2)
	Maybe      int      // unacknowledged requests whose email arrived anyway
	Unexpected []string // deliveries to addresses no request named
}

// CheckMail judges deliveries (messages received, by recipient) against
// the requests: every acknowledged email arrives at least once (the outbox
// is at-least-once), copies are counted, an unacknowledged request may or
// may not deliver, and nothing arrives that nobody asked for.
func CheckMail(reqs []MailRequest, delivered map[string]int) (MailReport, []error) {
	var rep MailReport
	var errs []error
	asked := map[string]bool{}
	acked := map[string]bool{}
	for _, r := range reqs {
		asked[r.To] = true
		if r.Acked {
			acked[r.To] = true
		}
	}
	for _, to := range slices.Sorted(maps.Keys(asked)) {
		n := delivered[to]
		if n > 1 {
			rep.Duplicates += n - 1
		}
		switch {
		case acked[to] && n == 0:
			rep.Acked++
			rep.Lost = append(rep.Lost, to)
			errs = append(errs, fmt.Errorf("lost: the email to %s was acknowledged and never delivered", to))
		case acked[to]:
			rep.Acked++
			rep.Delivered++
		case n > 0:
			rep.Maybe++
		}
	}
	for _, to := range slices.Sorted(maps.Keys(delivered)) {
		if !asked[to] && delivered[to] > 0 {
			rep.Unexpected = append(rep.Unexpected, to)
			errs = append(errs, fmt.Errorf("unexpected: %d emails to %s, which no request named", delivered[to], to))
		}
	}
	return rep, errs
}
