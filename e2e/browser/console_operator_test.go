package browser

import "testing"

// consoleProjects walks its page of the console (see consoleEnv).
func consoleProjects(t *testing.T, e *consoleEnv) {
	t.Fatal("not built yet")
}

// consoleCluster walks its page of the console (see consoleEnv).
func consoleCluster(t *testing.T, e *consoleEnv) {
	t.Fatal("not built yet")
}
