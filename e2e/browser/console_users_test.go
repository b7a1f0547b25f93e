package browser

import "testing"

// consoleUsers walks its page of the console (see consoleEnv).
func consoleUsers(t *testing.T, e *consoleEnv) {
	t.Fatal("not built yet")
}

// consolePush walks its page of the console (see consoleEnv).
func consolePush(t *testing.T, e *consoleEnv) {
	t.Fatal("not built yet")
}
