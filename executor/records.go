package executor

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// A record directory in the state dir holds one small file per thing a
// running executor must clean up if it dies (a process group, a staging
// file): written when the thing begins, removed when it ends, and drained
// by the next executor before its first hello. orphans.go and staging.go
// decide what a record says and what its cleanup is.

// writeRecord writes the record name in dir (0600), making dir (0700) the
// first time, or when it was removed, rather than stat it on every write.
func writeRecord(dir, name string, data []byte) error {
	path := filepath.Join(dir, name)
	err := os.WriteFile(path, data, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(dir, 0o700); err == nil {
			err = os.WriteFile(path, data, 0o600)
		}
	}
	return err
}

// drainRecords calls each with the name and content of every record in dir
// and removes it; a dir that cannot be read has none.
func drainRecords(dir string, each func(name string, data []byte)) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		data, _ := os.ReadFile(path)
		each(e.Name(), data)
		os.Remove(path)
	}
}
