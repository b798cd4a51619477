// Package checkpoint persists the agent's allocations, so that a restarted agent (and
// `podfence status` while it is down) knows which CPUs its running containers hold. The
// checkpoint is a directory holding a journal of changes, one JSON line each:
//
//	<dir>/VERSION              "2\n"
//	<dir>/allocations.jsonl    {"put":{"podUID":…,"container":…,"cpus":"4-5",…}}
//	                           {"del":{"podUID":…,"container":…}}
//
// A change is one append (a batch of changes one write(2)), so recording it costs the same
// with 1 or 5,000 containers; when the journal holds more than twice the lines it had live
// records at its last rewrite (plus compactSlack), it is rewritten with only the live ones
// (temp file, fsync, rename), which keeps appends O(1) amortised. The records are a cache of
// what the runtime shows: a line cut short by a crash, or damaged, is left out and reported,
// and the agent rebuilds that container from the runtime. Version 1 checkpoints (one file per
// record) are converted on Open.
package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/regfile"
)

// Version is the checkpoint format this package writes; it also reads version 1.
const Version = 2

const (
	versionFile = "VERSION"
	// JournalFile is the journal's name in the checkpoint directory.
	JournalFile = "allocations.jsonl"
	tmpSuffix   = regfile.TempSuffix
	// maxRecordBytes caps a journal line. A real record is under 1 KiB; the longest CPU lists
	// (every other CPU up to topology.MaxCPUID) take about 20 KB each.
	maxRecordBytes = 64 << 10
	// maxJournalBytes caps the journal Load reads: 1,000 records of the longest kind, or far
	// more containers than a node runs. A longer journal is refused unread and started anew.
	maxJournalBytes = 64 << 20
	// compactSlack is how many lines a journal may grow beyond twice its live records before
	// it is rewritten.
	compactSlack = 1024
)

// Store is a checkpoint directory. It is safe for concurrent use; changes are appended in
// the order their calls take the lock. One process should own a directory.
type Store struct {
	dir string

	mu      sync.Mutex
	f       *os.File // the journal, open for appends between rewrites (nil: open at the next)
	lines   int      // lines in the journal (an estimate until the first Load or rewrite)
	live    int      // live records at the last Load or rewrite
	carried []error  // version 1 records left out by Open, for the next Load to report
}

// Open opens the checkpoint in dir, creating the directory (mode 0700) and its VERSION file if
// needed, and converting a version 1 checkpoint. A VERSION this package cannot read is an
// error that says what to do.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create checkpoint directory: %w", err)
	}
	s := &Store{dir: dir}
	path := filepath.Join(dir, versionFile)
	b, err := regfile.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := regfile.WriteAtomic(dir, versionFile, []byte(strconv.Itoa(Version)+"\n")); err != nil {
			return nil, fmt.Errorf("create checkpoint version file: %w", err)
		}
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("read checkpoint version: %w", err)
	}
	switch found := strings.TrimSpace(string(b)); found {
	case strconv.Itoa(Version):
		return s, s.endLine()
	case "1":
		return s, s.convertV1()
	default:
		return nil, fmt.Errorf("checkpoint version file %s holds version %q, but this podfence supports only versions 1 and %d: "+
			"run a podfence release that supports version %q, or drain the node and delete %s",
			path, found, Version, found, dir)
	}
}

// Dir returns the checkpoint directory.
func (s *Store) Dir() string { return s.dir }

// Put records a, replacing any record with the same key, and syncs the journal. The pod UID
// and container name must be valid UTF-8 (JSON would alter them otherwise).
func (s *Store) Put(a allocation.Allocation) error {
	line, err := encodePut(a)
	if err != nil {
		return fmt.Errorf("checkpoint container %q of pod %q: %w", a.Container, a.PodUID, err)
	}
	if err := s.appendLines(line, 1, true); err != nil {
		return fmt.Errorf("checkpoint container %q of pod %q: %w", a.Container, a.PodUID, err)
	}
	return nil
}

// Delete removes the record of k, and syncs the journal. A missing record is not an error.
func (s *Store) Delete(k allocation.Key) error {
	line, err := encodeDel(k)
	if err == nil {
		err = s.appendLines(line, 1, true)
	}
	if err != nil {
		return fmt.Errorf("delete checkpoint of container %q of pod %q: %w", k.Container, k.PodUID, err)
	}
	return nil
}

// WriteBatch records puts and removes dels as Put and Delete do, in one append and with no
// sync: the agent's records are a cache of what the runtime shows (it rebuilds each container
// from the runtime), so a change lost by a power failure costs nothing but a rebuild. A
// change that cannot be encoded is left out and reported; the others are written. Errors are
// joined.
func (s *Store) WriteBatch(puts []allocation.Allocation, dels []allocation.Key) error {
	var (
		buf  []byte
		n    int
		errs []error
	)
	for _, a := range puts {
		line, err := encodePut(a)
		if err != nil {
			errs = append(errs, fmt.Errorf("checkpoint container %q of pod %q: %w", a.Container, a.PodUID, err))
			continue
		}
		buf, n = append(buf, line...), n+1
	}
	for _, k := range dels {
		line, err := encodeDel(k)
		if err != nil {
			continue // Put never writes such a key
		}
		buf, n = append(buf, line...), n+1
	}
	if n > 0 {
		if err := s.appendLines(buf, n, false); err != nil {
			errs = append(errs, fmt.Errorf("checkpoint batch of %d changes: %w", n, err))
		}
	}
	return errors.Join(errs...)
}

// appendLines appends n encoded lines to the journal (creating it if needed), syncing it
// when sync is set, then rewrites the journal if it has grown past its bound.
func (s *Store) appendLines(buf []byte, n int, sync bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		f, err := regfile.OpenFile(filepath.Join(s.dir, JournalFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		s.f = f
	}
	_, err := s.f.Write(buf)
	if err == nil && sync {
		err = s.f.Sync()
	}
	if err != nil {
		s.closeLocked() // open anew at the next change
		return err
	}
	s.lines += n
	if s.lines > 2*s.live+compactSlack {
		_, _, err := s.compactLocked()
		return err
	}
	return nil
}

// Load returns every readable record, sorted by pod UID then container name. Each line it
// cannot read (cut short, damaged, over 64 KiB) is left out and reported in the error with
// its line number, the problem and what it means; the caller rebuilds those containers from
// the runtime. The journal is then rewritten with the live records only, which also drops
// the damaged lines and any temp file left behind.
func (s *Store) Load() ([]allocation.Allocation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	allocs, problems, err := s.compactLocked()
	problems, s.carried = append(s.carried, problems...), nil
	if err != nil {
		return allocs, fmt.Errorf("load checkpoint %s: %w", s.dir, err)
	}
	if len(problems) > 0 {
		return allocs, fmt.Errorf("load checkpoint %s: %w", s.dir, errors.Join(problems...))
	}
	return allocs, nil
}

// compactLocked reads the journal and rewrites it with its live records. It returns them,
// the problems of the lines it left out, and the error that kept it from reading or
// rewriting. The caller holds mu.
func (s *Store) compactLocked() ([]allocation.Allocation, []error, error) {
	s.closeLocked() // a rewrite replaces the file; a journal removed meanwhile is made anew
	path := filepath.Join(s.dir, JournalFile)
	live, problems, err := readJournal(path)
	missing := errors.Is(err, fs.ErrNotExist)
	if err != nil && !missing {
		return nil, nil, err
	}
	allocs := make([]allocation.Allocation, 0, len(live))
	for _, a := range live {
		allocs = append(allocs, a)
	}
	slices.SortFunc(allocs, func(a, b allocation.Allocation) int { return compareKeys(a.Key(), b.Key()) })
	if err := s.removeTemps(); err != nil {
		return allocs, problems, err
	}
	if missing && len(allocs) == 0 {
		s.lines, s.live = 0, 0
		return allocs, problems, nil
	}
	var buf []byte
	for _, a := range allocs {
		line, err := encodePut(a)
		if err != nil { // readJournal accepted it, so it encodes
			return allocs, problems, err
		}
		buf = append(buf, line...)
	}
	if err := regfile.WriteAtomic(s.dir, JournalFile, buf); err != nil {
		return allocs, problems, fmt.Errorf("rewrite journal: %w", err)
	}
	s.lines, s.live = len(allocs), len(allocs)
	return allocs, problems, nil
}

// Close closes the journal; a later change opens it again.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closeLocked()
}

func (s *Store) closeLocked() error {
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// removeTemps removes temp files a crash left in the directory.
func (s *Store) removeTemps() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), tmpSuffix) {
			if err := os.Remove(filepath.Join(s.dir, e.Name())); err != nil {
				errs = append(errs, fmt.Errorf("remove leftover temp file: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// endLine makes sure the journal ends with a newline, so that a line cut short by a crash
// stays a line of its own (left out by Load) instead of swallowing the next append.
func (s *Store) endLine() error {
	f, err := regfile.OpenFile(filepath.Join(s.dir, JournalFile), os.O_RDWR|os.O_APPEND, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open checkpoint journal: %w", err)
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil || info.Size() == 0 {
		return err
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, info.Size()-1); err != nil {
		return fmt.Errorf("read checkpoint journal: %w", err)
	}
	if last[0] != '\n' {
		if _, err := f.Write([]byte{'\n'}); err != nil {
			return fmt.Errorf("end checkpoint journal's last line: %w", err)
		}
	}
	return nil
}

func compareKeys(a, b allocation.Key) int {
	if c := strings.Compare(a.PodUID, b.PodUID); c != 0 {
		return c
	}
	return strings.Compare(a.Container, b.Container)
}
