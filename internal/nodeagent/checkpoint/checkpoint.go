// Package checkpoint persists the agent's allocations, so that a restarted agent knows which CPUs
// its running containers hold. The checkpoint is a directory with one small file per container,
// so recording a change costs the same with 1 or 1,000 containers:
//
//	<dir>/VERSION                      "1\n"
//	<dir>/<podUID>_<container>.json    {"version":1,"allocation":{"podUID":…,"cpus":"4-5",…}}
//
// Both parts of a record's file name are escaped: bytes other than A-Z, a-z, 0-9 and '-' become
// %XX. Names therefore never hold '/', never start with '.', and distinct keys get distinct
// files. A write goes to a temp file ("*.tmp") that is fsynced and renamed over the record,
// then the directory is fsynced (rename(2)): after a crash a record is either old or new, and
// Load removes any temp file left behind.
package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

// Version is the checkpoint format this package reads and writes.
const Version = 1

const (
	versionFile  = "VERSION"
	recordSuffix = ".json"
	tmpSuffix    = ".tmp"
	// maxNameLen keeps a record's temp file name ("<name>.<uint32>.tmp") within the usual
	// 255-byte file name limit.
	maxNameLen = 255 - len(".4294967295"+tmpSuffix)
	// maxRecordBytes caps a record file. A real record is under 1 KiB; the longest CPU
	// lists (every other CPU up to topology.MaxCPUID) take about 20 KB each.
	maxRecordBytes = 64 << 10
)

// Store is a checkpoint directory. It is safe for concurrent use; Puts and Deletes of
// different keys proceed in parallel. One process should own a directory.
type Store struct {
	dir string
	// mu is held shared by Put and Delete and exclusively by Load, so Load's removal of
	// temp files never races with a write in flight.
	mu sync.RWMutex
}

// record is the content of one record file.
type record struct {
	Version    int                    `json:"version"`
	Allocation *allocation.Allocation `json:"allocation"`
}

// Open opens the checkpoint in dir, creating the directory (mode 0700) and its VERSION file if
// needed. A VERSION other than Version is an error that says what to do.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create checkpoint directory: %w", err)
	}
	s := &Store{dir: dir}
	path := filepath.Join(dir, versionFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := s.writeAtomic(versionFile, []byte(strconv.Itoa(Version)+"\n")); err != nil {
			return nil, fmt.Errorf("create checkpoint version file: %w", err)
		}
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint version: %w", err)
	}
	if found := strings.TrimSpace(string(b)); found != strconv.Itoa(Version) {
		return nil, fmt.Errorf("checkpoint version file %s holds version %q, but this podfence supports only version %d: "+
			"run a podfence release that supports version %q, or drain the node and delete %s",
			path, found, Version, found, dir)
	}
	return s, nil
}

// Dir returns the checkpoint directory.
func (s *Store) Dir() string { return s.dir }

// Put records a, replacing any record with the same key. Only a's own file is written. The pod
// UID and container name must be valid UTF-8 (JSON would alter them otherwise).
func (s *Store) Put(a allocation.Allocation) error {
	name, data, err := encodeRecord(a)
	if err != nil {
		return fmt.Errorf("checkpoint container %q of pod %q: %w", a.Container, a.PodUID, err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.writeAtomic(name, data); err != nil {
		return fmt.Errorf("checkpoint container %q of pod %q: %w", a.Container, a.PodUID, err)
	}
	return nil
}

// encodeRecord returns a's file name and content, or why Load would refuse them.
func encodeRecord(a allocation.Allocation) (string, []byte, error) {
	if !utf8.ValidString(a.PodUID) || !utf8.ValidString(a.Container) {
		return "", nil, errors.New("pod UID and container name must be valid UTF-8")
	}
	name := fileName(a.Key())
	if len(name) > maxNameLen {
		return "", nil, fmt.Errorf("file name is %d bytes, over the limit of %d", len(name), maxNameLen)
	}
	data, err := json.Marshal(record{Version: Version, Allocation: &a})
	if err != nil {
		return "", nil, err
	}
	if len(data)+1 > maxRecordBytes { // Load would refuse it
		return "", nil, fmt.Errorf("record is %d bytes, over the limit of %d bytes", len(data)+1, maxRecordBytes)
	}
	return name, append(data, '\n'), nil
}

// Delete removes the record of k. A missing record is not an error.
func (s *Store) Delete(k allocation.Key) error {
	name := fileName(k)
	if len(name) > maxNameLen {
		return nil // Put never writes such a name.
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	err := os.Remove(filepath.Join(s.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err == nil {
		err = syncDir(s.dir)
	}
	if err != nil {
		return fmt.Errorf("delete checkpoint of container %q of pod %q: %w", k.Container, k.PodUID, err)
	}
	return nil
}

// Load returns every readable record, sorted by pod UID then container name. It removes
// leftover temp files and ignores files that are neither records nor VERSION. Each unreadable
// record (including one over 64 KiB, which is refused unread) is left out and reported in the
// error with its path, the problem and what to do; the caller rebuilds those containers from
// the runtime.
func (s *Store) Load() ([]allocation.Allocation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("load checkpoint: %w", err)
	}
	var (
		allocs  []allocation.Allocation
		errs    []error
		removed bool
	)
	for _, e := range entries {
		path := filepath.Join(s.dir, e.Name())
		switch {
		case strings.HasSuffix(e.Name(), tmpSuffix):
			if err := os.Remove(path); err != nil {
				errs = append(errs, fmt.Errorf("remove leftover temp file: %w", err))
			}
			removed = true
		case strings.HasSuffix(e.Name(), recordSuffix):
			a, err := loadRecord(path)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			allocs = append(allocs, a)
		}
	}
	if removed {
		if err := syncDir(s.dir); err != nil {
			errs = append(errs, err)
		}
	}
	slices.SortFunc(allocs, func(a, b allocation.Allocation) int { return compareKeys(a.Key(), b.Key()) })
	if len(errs) > 0 {
		return allocs, fmt.Errorf("load checkpoint %s: %w", s.dir, errors.Join(errs...))
	}
	return allocs, nil
}

// loadRecord reads and decodes the record file at path, refusing it unread when it is over
// maxRecordBytes.
func loadRecord(path string) (allocation.Allocation, error) {
	f, err := os.Open(path)
	if err != nil {
		return allocation.Allocation{}, err
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return allocation.Allocation{}, err
	}
	if info.Size() > maxRecordBytes {
		return allocation.Allocation{}, recordError(path, tooBig(strconv.FormatInt(info.Size(), 10)))
	}
	b, err := io.ReadAll(io.LimitReader(f, maxRecordBytes+1))
	if err != nil {
		return allocation.Allocation{}, err
	}
	return decodeRecord(path, b)
}

// decodeRecord parses the content of the record file at path. Errors name the file.
func decodeRecord(path string, b []byte) (allocation.Allocation, error) {
	if len(b) > maxRecordBytes {
		return allocation.Allocation{}, recordError(path, tooBig("more than "+strconv.Itoa(maxRecordBytes)))
	}
	a, err := parseRecord(filepath.Base(path), b)
	if err != nil {
		return allocation.Allocation{}, recordError(path, err)
	}
	return a, nil
}

func tooBig(size string) error {
	return fmt.Errorf("file is %s bytes, over the limit of %d bytes (a record is under 1 KiB)", size, maxRecordBytes)
}

func recordError(path string, err error) error {
	return fmt.Errorf("checkpoint record %s: %w: repair the file, or delete it if its container no longer runs", path, err)
}

func parseRecord(name string, b []byte) (allocation.Allocation, error) {
	var r record
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return allocation.Allocation{}, fmt.Errorf("decode JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return allocation.Allocation{}, fmt.Errorf("decode JSON: data after the record")
	}
	if r.Version != Version {
		return allocation.Allocation{}, fmt.Errorf("record version is %d, this podfence reads version %d", r.Version, Version)
	}
	if r.Allocation == nil {
		return allocation.Allocation{}, fmt.Errorf("no allocation")
	}
	if want := fileName(r.Allocation.Key()); want != name {
		return allocation.Allocation{}, fmt.Errorf("holds container %q of pod %q, whose file name is %s",
			r.Allocation.Container, r.Allocation.PodUID, want)
	}
	return *r.Allocation, nil
}

// writeAtomic replaces dir/name with data: temp file, fsync, rename, fsync dir.
// WriteBatch records puts and removes dels as Put and Delete do, but with one directory
// sync for the whole batch and no file sync: the agent's records are a cache of what the
// runtime shows (it rebuilds each container from the runtime), so a record lost or cut short
// by a power failure costs nothing but a rebuild, while a sync per record was a third of the
// agent's CPU per container. Every change is tried; the errors are joined.
func (s *Store) WriteBatch(puts []allocation.Allocation, dels []allocation.Key) error {
	var errs []error
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, a := range puts {
		name, data, err := encodeRecord(a)
		if err == nil {
			err = s.write(name, data, false)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("checkpoint container %q of pod %q: %w", a.Container, a.PodUID, err))
		}
	}
	for _, k := range dels {
		name := fileName(k)
		if len(name) > maxNameLen {
			continue
		}
		if err := os.Remove(filepath.Join(s.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("delete checkpoint of container %q of pod %q: %w", k.Container, k.PodUID, err))
		}
	}
	if len(puts)+len(dels) > 0 {
		if err := syncDir(s.dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Store) writeAtomic(name string, data []byte) error { return s.write(name, data, true) }

// write replaces file name with data through a temp file and a rename; with sync, the file
// and the directory are synced.
func (s *Store) write(name string, data []byte, sync bool) (err error) {
	f, err := os.CreateTemp(s.dir, name+".*"+tmpSuffix)
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
	if sync {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), filepath.Join(s.dir, name)); err != nil {
		return err
	}
	if !sync {
		return nil
	}
	return syncDir(s.dir)
}

func syncDir(dir string) error {
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

// fileName is the record file name of k: "<podUID>_<container>.json", both parts escaped.
func fileName(k allocation.Key) string {
	return escape(k.PodUID) + "_" + escape(k.Container) + recordSuffix
}

// escape keeps A-Z, a-z, 0-9 and '-' and writes every other byte as %XX, so the result holds
// no '/', '.' or '_' and distinct inputs give distinct outputs.
func escape(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '-' || '0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xF])
	}
	return b.String()
}

func compareKeys(a, b allocation.Key) int {
	if c := strings.Compare(a.PodUID, b.PodUID); c != 0 {
		return c
	}
	return strings.Compare(a.Container, b.Container)
}
