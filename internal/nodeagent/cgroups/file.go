package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Read returns the content of interface file name of the cgroup at dir.
func Read(dir, name string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("read cgroup file: %w", err)
	}
	return b, nil
}

// Write sets interface file name of the cgroup at dir to value with one write(2), which
// the kernel applies whole or not at all. The file must exist: the kernel makes interface
// files, so a missing one means the controller is not there, and Write never creates it.
func Write(dir, name, value string) error {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("write cgroup file: %w", err)
	}
	_, err = f.Write([]byte(value))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", value, path, err)
	}
	return nil
}

// Mkdir creates the cgroup at dir and any missing parents, as mkdir -p does, and returns
// the directories it created, outermost first. Another creator winning a race is fine.
func Mkdir(dir string) ([]string, error) {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		missing = append(missing, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	var created []string
	for i := len(missing) - 1; i >= 0; i-- {
		err := os.Mkdir(missing[i], 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return created, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		created = append(created, missing[i])
	}
	return created, nil
}

// Rmdir removes the cgroup at dir. It fails while the cgroup has processes or children.
func Rmdir(dir string) error {
	if err := syscall.Rmdir(dir); err != nil {
		return fmt.Errorf("remove cgroup %s: %w", dir, err)
	}
	return nil
}

// OS is the kernel's cgroupfs through Mkdir, Rmdir, Read and Write, for callers that take
// the cgroupfs as an interface so that tests can stand in for the kernel.
type OS struct{}

func (OS) Mkdir(dir string) ([]string, error)    { return Mkdir(dir) }
func (OS) Rmdir(dir string) error                { return Rmdir(dir) }
func (OS) Read(dir, name string) ([]byte, error) { return Read(dir, name) }
func (OS) Write(dir, name, value string) error   { return Write(dir, name, value) }

// Gone reports whether err says the cgroup or its file is gone: removed, or being removed
// (ENODEV from a file of a dying cgroup).
func Gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENODEV)
}

// Flat is a flat-keyed interface file ("<key> <value>" per line), as misc.current:
//
//	sgx_epc 4096
//	sev 0
type Flat map[string]string

// ParseFlat reads a flat-keyed file. Blank lines are skipped; a line that is not one key
// and one value is an error naming it.
func ParseFlat(b []byte) (Flat, error) {
	f := Flat{}
	for i, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) != 2 {
			return nil, fmt.Errorf("line %d %q: want \"<key> <value>\"", i+1, line)
		}
		f[fields[0]] = fields[1]
	}
	return f, nil
}

// Max is the value Uint returns for "max" (no limit).
const Max = math.MaxUint64

// Uint returns key's value as a number, Max for "max"; ok is false if key is absent.
func (f Flat) Uint(key string) (v uint64, ok bool, err error) {
	s, ok := f[key]
	if !ok {
		return 0, false, nil
	}
	if s == "max" {
		return Max, true, nil
	}
	v, err = strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, true, fmt.Errorf("%s %q: want a number or max", key, s)
	}
	return v, true, nil
}
