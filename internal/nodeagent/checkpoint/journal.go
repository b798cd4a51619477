package checkpoint

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/regfile"
)

// change is one journal line: exactly one of Put and Del.
type change struct {
	Put *allocation.Allocation `json:"put,omitempty"`
	Del *key                   `json:"del,omitempty"`
}

// key is an allocation.Key as a journal line spells it.
type key struct {
	PodUID    string `json:"podUID"`
	Container string `json:"container"`
}

// encodePut returns a's journal line, or why Load would refuse it.
func encodePut(a allocation.Allocation) ([]byte, error) {
	if err := checkKey(a.Key()); err != nil {
		return nil, err
	}
	return encodeLine(change{Put: &a})
}

// encodeDel returns the journal line that removes k's record.
func encodeDel(k allocation.Key) ([]byte, error) {
	if err := checkKey(k); err != nil {
		return nil, err
	}
	return encodeLine(change{Del: &key{PodUID: k.PodUID, Container: k.Container}})
}

func checkKey(k allocation.Key) error {
	if !utf8.ValidString(k.PodUID) || !utf8.ValidString(k.Container) {
		return errors.New("pod UID and container name must be valid UTF-8")
	}
	return nil
}

func encodeLine(c change) ([]byte, error) {
	data, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	if len(data)+1 > maxRecordBytes { // Load would refuse it
		return nil, fmt.Errorf("record is %d bytes, over the limit of %d bytes", len(data)+1, maxRecordBytes)
	}
	return append(data, '\n'), nil
}

// decodeLine parses one journal line (without its newline).
func decodeLine(b []byte) (change, error) {
	var c change
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return change{}, fmt.Errorf("decode JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return change{}, errors.New("decode JSON: data after the change")
	}
	switch {
	case c.Put != nil && c.Del != nil:
		return change{}, errors.New(`holds both "put" and "del"`)
	case c.Put == nil && c.Del == nil:
		return change{}, errors.New(`holds neither "put" nor "del"`)
	}
	return c, nil
}

// readJournal replays the journal at path: the live records by key, and a problem for each
// line left out. A journal over maxJournalBytes is refused unread (no records, one problem).
func readJournal(path string) (map[allocation.Key]allocation.Allocation, []error, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	live := map[allocation.Key]allocation.Allocation{}
	if info.Size() > maxJournalBytes {
		return live, []error{fmt.Errorf("checkpoint journal %s is %d bytes, over the limit of %d bytes: "+
			"left unread and started anew; every container is rebuilt from the runtime", path, info.Size(), maxJournalBytes)}, nil
	}
	var problems []error
	bad := func(n int, err error) {
		problems = append(problems, fmt.Errorf("checkpoint journal %s line %d: %w: left out; its container is rebuilt from the runtime",
			path, n, err))
	}
	r := bufio.NewReaderSize(f, maxRecordBytes)
	for n := 1; ; n++ {
		line, err := r.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			size := len(line)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = r.ReadSlice('\n')
				size += len(line)
			}
			bad(n, fmt.Errorf("line is over %d bytes long (a record is under 1 KiB)", maxRecordBytes))
			if err == io.EOF {
				return live, problems, nil
			}
			continue
		case err == io.EOF:
			if len(line) > 0 {
				bad(n, errors.New("line is cut short (no newline: a write a crash interrupted)"))
			}
			return live, problems, nil
		case err != nil:
			return live, problems, err
		}
		line = line[:len(line)-1]
		if len(line) == 0 {
			continue // endLine's newline after a cut line, or an operator's blank line
		}
		c, derr := decodeLine(line)
		switch {
		case derr != nil:
			bad(n, derr)
		case c.Put != nil:
			live[c.Put.Key()] = *c.Put
		default:
			delete(live, allocation.Key(*c.Del))
		}
	}
}
