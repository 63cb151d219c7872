//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly || windows)

package approvals

import "os"

// lockFile is a no-op where Countersign knows no file lock: one process
// writes the anchor file there (a single server on bbolt).
func lockFile(*os.File) error { return nil }

// unlockFile is lockFile's no-op release.
func unlockFile(*os.File) error { return nil }
