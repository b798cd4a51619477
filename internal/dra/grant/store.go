package grant

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/podfence/podfence/internal/regfile"
)

// Store keeps one file per grant, <claim UID>.json, in Dir. Writes are atomic (temporary
// file, fsync, rename, fsync of the directory), so a reader sees a whole grant or none.
type Store struct{ Dir string }

const suffix = ".json"

// ErrNotFound is returned (wrapped) by Get for a claim with no grant.
var ErrNotFound = errors.New("no grant")

func (s Store) path(uid string) (string, error) {
	if err := CheckUID("claim UID", uid); err != nil {
		return "", err
	}
	return filepath.Join(s.Dir, uid+suffix), nil
}

// Put writes g, replacing the claim's earlier grant.
func (s Store) Put(g Grant) error {
	data, err := Marshal(g)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("grant store: %w", err)
	}
	if err := writeAtomic(s.Dir, g.ClaimUID+suffix, data); err != nil {
		return fmt.Errorf("grant store: write claim %s: %w", g.ClaimUID, err)
	}
	return nil
}

// Get reads the claim's grant; ErrNotFound when there is none.
func (s Store) Get(uid string) (Grant, error) {
	p, err := s.path(uid)
	if err != nil {
		return Grant{}, err
	}
	f, err := regfile.Open(p) // a FIFO here would block a plain open forever
	if errors.Is(err, fs.ErrNotExist) {
		return Grant{}, fmt.Errorf("claim %s: %w", uid, ErrNotFound)
	}
	if err != nil {
		return Grant{}, fmt.Errorf("grant store: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return Grant{}, fmt.Errorf("grant store: read %s: %w", p, err)
	}
	g, err := Parse(data)
	if err != nil {
		return Grant{}, fmt.Errorf("%s: %w", p, err)
	}
	if g.ClaimUID != uid {
		return Grant{}, fmt.Errorf("%s: holds claim %s", p, g.ClaimUID)
	}
	return g, nil
}

// Delete removes the claim's grant; a missing one is not an error.
func (s Store) Delete(uid string) error {
	p, err := s.path(uid)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("grant store: %w", err)
	}
	return syncDir(s.Dir)
}

// List reads every grant, sorted by claim UID; a file that does not read is reported in
// errs and left out. A missing directory holds no grants.
func (s Store) List() (grants []Grant, errs []error) {
	entries, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []error{fmt.Errorf("grant store: %w", err)}
	}
	for _, e := range entries {
		uid, ok := strings.CutSuffix(e.Name(), suffix)
		if !ok || e.IsDir() {
			continue
		}
		g, err := s.Get(uid)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		grants = append(grants, g)
	}
	sort.Slice(grants, func(i, j int) bool { return grants[i].ClaimUID < grants[j].ClaimUID })
	return grants, errs
}

func writeAtomic(dir, name string, data []byte) (err error) {
	f, err := os.CreateTemp(dir, "."+name+".*.tmp")
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
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
