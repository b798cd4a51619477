package regfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// TempSuffix ends the name of the temporary file WriteAtomic writes before the rename: a
// reader of the directory left with one after a crash may remove it.
const TempSuffix = ".tmp"

// WriteAtomic replaces dir/name with data: written to a temporary file in dir, synced,
// renamed over name, and the directory synced, so that after a crash the file is either the
// old one or the new one. A failure leaves no temporary file.
func WriteAtomic(dir, name string, data []byte) (err error) {
	f, err := os.CreateTemp(dir, name+".*"+TempSuffix)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	return SyncDir(dir)
}

// SyncDir syncs a directory (a rename in it made durable); its own error when it is gone.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		_ = d.Close()
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return d.Close()
}
