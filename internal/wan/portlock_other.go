//go:build !unix

package wan

import "os"

// tryLock cannot lock elsewhere: the listen check alone guards the port.
func tryLock(*os.File) bool { return true }
