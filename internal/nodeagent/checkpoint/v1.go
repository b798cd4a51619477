package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/regfile"
)

// Version 1 kept one file per record, <podUID>_<container>.json (both parts escaped), holding
// {"version":1,"allocation":{…}}. Open converts such a checkpoint to the journal.
const v1Suffix = ".json"

// v1Record is the content of a version 1 record file.
type v1Record struct {
	Version    int                    `json:"version"`
	Allocation *allocation.Allocation `json:"allocation"`
}

// convertV1 writes the readable version 1 records to the journal, then VERSION 2, then
// removes the record files; the unreadable ones are reported by the first Load. A crash
// before VERSION is written converts again on the next Open.
func (s *Store) convertV1() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("convert version 1 checkpoint: %w", err)
	}
	var (
		buf   []byte
		files []string
	)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), v1Suffix) {
			continue
		}
		path := filepath.Join(s.dir, e.Name())
		files = append(files, path)
		a, err := loadV1Record(path)
		if err != nil {
			s.carried = append(s.carried, err)
			continue
		}
		line, err := encodePut(a)
		if err != nil {
			s.carried = append(s.carried, fmt.Errorf("checkpoint record %s: %w: left out", path, err))
			continue
		}
		buf = append(buf, line...)
	}
	if err := regfile.WriteAtomic(s.dir, JournalFile, buf); err != nil {
		return fmt.Errorf("convert version 1 checkpoint: write journal: %w", err)
	}
	if err := regfile.WriteAtomic(s.dir, versionFile, []byte(strconv.Itoa(Version)+"\n")); err != nil {
		return fmt.Errorf("convert version 1 checkpoint: write version: %w", err)
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil {
			return fmt.Errorf("convert version 1 checkpoint: %w", err)
		}
	}
	return nil
}

// loadV1Record reads a version 1 record file, refusing it unread when it is over
// maxRecordBytes.
func loadV1Record(path string) (allocation.Allocation, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return allocation.Allocation{}, err
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, maxRecordBytes+1))
	if err != nil {
		return allocation.Allocation{}, err
	}
	if len(b) > maxRecordBytes {
		return allocation.Allocation{}, fmt.Errorf("checkpoint record %s: file is over the limit of %d bytes: left out", path, maxRecordBytes)
	}
	a, err := parseV1Record(filepath.Base(path), b)
	if err != nil {
		return allocation.Allocation{}, fmt.Errorf("checkpoint record %s: %w: left out", path, err)
	}
	return a, nil
}

func parseV1Record(name string, b []byte) (allocation.Allocation, error) {
	var r v1Record
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return allocation.Allocation{}, fmt.Errorf("decode JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return allocation.Allocation{}, errors.New("decode JSON: data after the record")
	}
	if r.Version != 1 {
		return allocation.Allocation{}, fmt.Errorf("record version is %d, want 1", r.Version)
	}
	if r.Allocation == nil {
		return allocation.Allocation{}, errors.New("no allocation")
	}
	if want := v1FileName(r.Allocation.Key()); want != name {
		return allocation.Allocation{}, fmt.Errorf("holds container %q of pod %q, whose file name is %s",
			r.Allocation.Container, r.Allocation.PodUID, want)
	}
	return *r.Allocation, nil
}

// v1FileName is the version 1 record file name of k: "<podUID>_<container>.json", both
// parts escaped (bytes other than A-Z, a-z, 0-9 and '-' as %XX).
func v1FileName(k allocation.Key) string {
	return v1Escape(k.PodUID) + "_" + v1Escape(k.Container) + v1Suffix
}

func v1Escape(s string) string {
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
