package browser

import "testing"

// consoleData walks its page of the console (see consoleEnv).
func consoleData(t *testing.T, e *consoleEnv) {
	t.Fatal("not built yet")
}

// consoleRules walks its page of the console (see consoleEnv).
func consoleRules(t *testing.T, e *consoleEnv) {
	t.Fatal("not built yet")
}
