package raftstore

import "testing"

func TestJSONDepth(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{`1`, 0},
		{`"[[[{"`, 0},
		{`{}`, 1},
		{`[[],[[]]]`, 3},
		{`{"a":{"b":["\"]]]",{"c":1}]}}`, 4},
		{`{"a":"\\"}`, 1},
		{`[[[`, 3},
	} {
		if got := JSONDepth([]byte(c.in)); got != c.want {
			t.Errorf("JSONDepth(%s) = %d, want %d", c.in, got, c.want)
		}
	}
}
