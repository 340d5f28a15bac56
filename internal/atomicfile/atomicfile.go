// Package atomicfile writes a file so that a reader sees the old content or the
// new, never a part: temp file in the same directory, chmod, write, fsync,
// close, rename; the temp file removed on any error.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write writes data to path through a temp file in the same
// directory: create (mode perm), write, fsync, close, rename; the temp file is
// removed on any error. A reader sees the old content or the new, never a
// part. The mode is set on the temp file before any byte is written, so a
// secret is never readable by others even for an instant.
func Write(path string, data []byte, perm os.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, derr := os.Open(dir); derr == nil { // make the rename durable
		d.Sync()
		d.Close()
	}
	return nil
}
