package bolt

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// PlaceNew puts the finished file tmp (synced and closed) at to without
// ever replacing a file there, then syncs to's directory, so the new name
// survives a crash: a hard link, which fails if to exists, then tmp is
// removed; on a file system without hard links, a rename once to is seen
// to be absent. A backup and a restore end with it: neither writes over a
// store.
func PlaceNew(tmp, to string) error {
	if err := placeNew(tmp, to); err != nil {
		return err
	}
	return syncFile(filepath.Dir(to))
}

func placeNew(tmp, to string) error {
	err := os.Link(tmp, to)
	if err == nil {
		return os.Remove(tmp)
	}
	if errors.Is(err, fs.ErrExist) {
		return err
	}
	if _, serr := os.Lstat(to); serr == nil {
		return fmt.Errorf("%s appeared meanwhile; it is left as it is", to)
	}
	return os.Rename(tmp, to)
}

// CopyNew copies the file from to the new file to (mode 0600), synced,
// failing if to exists (PlaceNew): a restore makes a new store, never
// writes over one.
func CopyNew(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(to), filepath.Base(to)+".restore-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once it is in place
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return PlaceNew(tmp.Name(), to)
}
