package node

import "testing"

func TestHeloName(t *testing.T) {
	for in, want := range map[string]string{
		"https://app.example.com":       "app.example.com",
		"https://app.example.com:8443/": "app.example.com",
		"http://127.0.0.1:8080":         "",
		"http://[::1]:8080":             "",
		"http://localhost:8080":         "",
		"":                              "",
		"://bad":                        "",
	} {
		if got := heloName(in); got != want {
			t.Errorf("heloName(%q) = %q, want %q", in, got, want)
		}
	}
}
