package pools

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/podfence/podfence/internal/regfile"
)

// File name patterns Load reads from a directory (CPU-Pooler reads poolconfig-*).
const (
	patternYAML = "poolconfig-*.yaml"
	patternYML  = "poolconfig-*.yml"
)

// MaxConfigBytes caps a pool config file, and a directory's pool config files together: a
// ConfigMap holds at most 1 MiB. Larger input is refused before it is read.
const MaxConfigBytes = 1 << 20

// Load reads pool configs from path: a single file (any name), or a directory such as a
// mounted ConfigMap, where it reads every top-level entry named poolconfig-*.yaml or
// poolconfig-*.yml in name order, following symlinks and skipping names that start with
// ".." (the ConfigMap volume's own ..data links). Input over MaxConfigBytes is refused
// unread. Errors from every file are returned.
func Load(path string) ([]*Config, error) { return (*Loader)(nil).Load(path) }

// Loader is Load for repeated calls: a file whose bytes are the same as at the previous call
// is not parsed again, and its previous result is returned (do not modify it). The zero
// value is ready to use; a nil *Loader parses every time. A Loader is safe for concurrent use.
type Loader struct {
	mu   sync.Mutex
	last map[string]parsed // by file path
}

// parsed is the result of parsing a file whose content hashed to sum.
type parsed struct {
	sum [sha256.Size]byte
	cfg *Config
	err error
}

// Load is the package's Load, parsing only files that changed since the previous call.
func (l *Loader) Load(path string) ([]*Config, error) {
	files, err := configFiles(path)
	if err != nil {
		return nil, err
	}
	if l != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
	}
	next := make(map[string]parsed, len(files))
	var configs []*Config
	var errs []error
	total := 0
	for _, file := range files {
		data, err := readConfig(file)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if total += len(data); total > MaxConfigBytes { // a file grew since configFiles
			return nil, tooBig(path, fmt.Sprintf("pool config files total at least %d bytes", total))
		}
		p := parsed{sum: sha256.Sum256(data)}
		if prev, ok := l.lookup(file); ok && prev.sum == p.sum {
			p = prev
		} else {
			p.cfg, p.err = Parse(file, data)
		}
		next[file] = p
		if p.err != nil {
			errs = append(errs, p.err)
			continue
		}
		configs = append(configs, p.cfg)
	}
	if l != nil {
		l.last = next
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return configs, nil
}

func (l *Loader) lookup(file string) (parsed, bool) {
	if l == nil {
		return parsed{}, false
	}
	p, ok := l.last[file]
	return p, ok
}

// configFiles returns the files Load reads from path, in order, after checking their sizes
// as os.Stat reports them against MaxConfigBytes.
func configFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("load pool configs: %w", err)
	}
	if !info.IsDir() {
		if info.Size() > MaxConfigBytes {
			return nil, tooBig(path, fmt.Sprintf("file is %d bytes", info.Size()))
		}
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("load pool configs: %w", err)
	}
	var files, others, sizes []string
	var errs []error
	var total int64
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "..") {
			continue
		}
		yamlName, _ := filepath.Match(patternYAML, name)
		ymlName, _ := filepath.Match(patternYML, name)
		if !yamlName && !ymlName {
			others = append(others, name)
			continue
		}
		file := filepath.Join(path, name)
		files = append(files, file)
		if info, err := os.Stat(file); err == nil && info.Mode().IsRegular() { // else readConfig says why
			if info.Size() > MaxConfigBytes {
				errs = append(errs, tooBig(file, fmt.Sprintf("file is %d bytes", info.Size())))
			}
			total += info.Size()
			sizes = append(sizes, fmt.Sprintf("%s: %d", name, info.Size()))
		}
	}
	switch {
	case len(errs) > 0:
		return nil, errors.Join(errs...)
	case total > MaxConfigBytes:
		return nil, tooBig(path, fmt.Sprintf("pool config files total %d bytes (%s)", total, strings.Join(sizes, ", ")))
	case len(files) == 0:
		found := "it is empty"
		if len(others) > 0 {
			found = "it holds " + strings.Join(others, ", ")
		}
		return nil, fmt.Errorf("no pool config in %s: want files named %s or %s, but %s",
			path, patternYAML, patternYML, found)
	}
	return files, nil
}

// readConfig reads the pool config file at path, at most MaxConfigBytes+1 bytes of it.
func readConfig(path string) ([]byte, error) {
	f, err := regfile.Open(path) // a FIFO here would block a plain open forever
	if err != nil {
		return nil, fmt.Errorf("load pool config: %w", err)
	}
	defer func() { _ = f.Close() }()
	var size int64
	info, err := f.Stat()
	if err == nil {
		size = min(info.Size(), MaxConfigBytes)
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead)) // one allocation
	if _, err := buf.ReadFrom(io.LimitReader(f, MaxConfigBytes+1)); err != nil {
		return nil, fmt.Errorf("load pool config: %w", err)
	}
	if buf.Len() > MaxConfigBytes { // it was replaced or grew since configFiles: say the size of the one read
		if info, err := f.Stat(); err == nil && info.Size() > MaxConfigBytes {
			return nil, tooBig(path, fmt.Sprintf("file is %d bytes", info.Size()))
		}
		return nil, tooBig(path, fmt.Sprintf("file is more than %d bytes", MaxConfigBytes))
	}
	return buf.Bytes(), nil
}

// tooBig refuses source, whose size is given by what.
func tooBig(source, what string) error {
	return &ConfigError{Source: source, Reason: fmt.Sprintf(
		"%s, over the limit of %d bytes (1 MiB, the most a ConfigMap holds)", what, MaxConfigBytes)}
}
