package driver

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/podfence/podfence/internal/dra"
	"github.com/podfence/podfence/internal/dra/grant"
	"github.com/podfence/podfence/internal/regfile"
)

// cdiDir is the directory of CDI spec files the runtime reads (/var/run/cdi).
type cdiDir string

// write writes the claim's CDI spec file atomically (a temporary name the runtime ignores,
// fsync, rename, fsync of the directory); an identical file is left as it is.
func (d cdiDir) write(uid string) error {
	data, err := dra.CDISpec(uid)
	if err != nil {
		return err
	}
	name := filepath.Join(string(d), dra.CDISpecFile(uid))
	if old, err := regfile.ReadFile(name); err == nil && bytes.Equal(old, data) {
		return nil
	}
	if err := os.MkdirAll(string(d), 0o755); err != nil {
		return fmt.Errorf("CDI spec: %w", err)
	}
	f, err := os.CreateTemp(string(d), "."+dra.CDISpecFile(uid)+".*.tmp")
	if err != nil {
		return fmt.Errorf("CDI spec: %w", err)
	}
	defer func() { _ = os.Remove(f.Name()) }() // after the rename: nothing to remove
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err == nil {
		err = syncDir(string(d))
	}
	if err != nil {
		return fmt.Errorf("CDI spec %s: %w", name, err)
	}
	return nil
}

// remove removes the claim's CDI spec file; a missing one is not an error.
func (d cdiDir) remove(uid string) error {
	if err := grant.CheckUID("claim UID", uid); err != nil {
		return err
	}
	name := filepath.Join(string(d), dra.CDISpecFile(uid))
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("CDI spec: %w", err)
	}
	return nil
}

// claims lists the claim UIDs of this driver's CDI spec files.
func (d cdiDir) claims() ([]string, error) {
	entries, err := os.ReadDir(string(d))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("CDI spec directory: %w", err)
	}
	var uids []string
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), dra.DriverName+"-")
		if uid, json := strings.CutSuffix(rest, ".json"); ok && json && grant.CheckUID("", uid) == nil {
			uids = append(uids, uid)
		}
	}
	return uids, nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
