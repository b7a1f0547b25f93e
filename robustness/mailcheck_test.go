package robustness

import (
	"reflect"
	"testing"
)

func TestCheckMail(t *testing.T) {
	reqs := []MailRequest{
		{To: "a@x", Acked: true}, {To: "b@x", Acked: true}, {To: "c@x", Acked: false, Err: "timeout"},
	}
	tests := []struct {
		name      string
		delivered map[string]int
		want      MailReport
		errs      int
	}{
		{"each once", map[string]int{"a@x": 1, "b@x": 1},
			MailReport{Acked: 2, Delivered: 2}, 0},
		{"duplicates are counted, not failures", map[string]int{"a@x": 3, "b@x": 1},
			MailReport{Acked: 2, Delivered: 2, Duplicates: 2}, 0},
		{"an unacknowledged request may deliver", map[string]int{"a@x": 1, "b@x": 1, "c@x": 1},
			MailReport{Acked: 2, Delivered: 2, Maybe: 1}, 0},
		{"a lost email fails", map[string]int{"a@x": 1},
			MailReport{Acked: 2, Delivered: 1, Lost: []string{"b@x"}}, 1},
		{"an email nobody asked for fails", map[string]int{"a@x": 1, "b@x": 1, "z@x": 1},
			MailReport{Acked: 2, Delivered: 2, Unexpected: []string{"z@x"}}, 1},
		{"nothing delivered", map[string]int{},
			MailReport{Acked: 2, Lost: []string{"a@x", "b@x"}}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := CheckMail(reqs, tc.delivered)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("report %+v, want %+v", got, tc.want)
			}
			if len(errs) != tc.errs {
				t.Errorf("errors %v, want %d", errs, tc.errs)
			}
		})
	}
}
