//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package approvals

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive lock on f, waiting for another process's
// to be released: flock(2), which Linux's NFS client maps to an NFS lock,
// so that replicas mounting one volume exclude each other too.
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			return err
		}
	}
}

// unlockFile releases lockFile's lock (closing f releases it too).
func unlockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
