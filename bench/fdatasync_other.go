//go:build !linux

package bench

import "os"

func fdatasync(f *os.File) error { return f.Sync() }
