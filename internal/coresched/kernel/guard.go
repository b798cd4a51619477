package kernel

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Sysctl files the guard reads and writes, relative to a proc root such as "/proc".
const (
	// GroupIdentityFile is Anolis's Group Identity switch; with core scheduling also on, those
	// kernels hard-lock.
	GroupIdentityFile = "sys/kernel/sched_group_identity_enabled"
	// SchedCoreFile is the runtime core-scheduling switch some vendor kernels add.
	SchedCoreFile = "sys/kernel/sched_core"
)

var (
	// ErrGroupIdentityOn: Group Identity is on and could not be turned off; create no cookie.
	ErrGroupIdentityOn = errors.New("group identity is on and could not be turned off")
	// ErrSchedCoreOff: the kernel's sched_core switch is 0 and could not be turned on.
	ErrSchedCoreOff = errors.New("sched_core sysctl is off and could not be turned on")
)

// Sysctl is one guard file as the guard found and left it.
type Sysctl struct {
	Path    string // absolute path: proc root + file
	Present bool
	Before  string // trimmed content before the guard; "" when absent
	After   string // trimmed content after the guard; equal to Before when unchanged
}

// Changed reports whether the guard wrote this file.
func (s Sysctl) Changed() bool { return s.Before != s.After }

// GuardReport is what Guard found and did, for the caller to log once.
type GuardReport struct {
	GroupIdentity Sysctl
	SchedCore     Sysctl
}

// Guard makes the kernel safe for core-scheduling cookies, under procRoot (normally "/proc"):
// if GroupIdentityFile reads anything but 0 it writes 0, and if SchedCoreFile reads 0 it writes
// 1; absent files are fine (mainline kernels have neither). It returns an error wrapping
// ErrGroupIdentityOn when Group Identity stays on (the caller must then create no cookie) or
// ErrSchedCoreOff when sched_core stays off. The report is valid even with an error.
func Guard(procRoot string) (GuardReport, error) {
	var r GuardReport
	var err error
	r.GroupIdentity, err = ensure(procRoot, GroupIdentityFile, func(v string) bool { return v == "0" }, "0")
	if err != nil {
		return r, fmt.Errorf("core scheduling guard: %w: %w", ErrGroupIdentityOn, err)
	}
	r.SchedCore, err = ensure(procRoot, SchedCoreFile, func(v string) bool { return v != "0" }, "1")
	if err != nil {
		return r, fmt.Errorf("core scheduling guard: %w: %w", ErrSchedCoreOff, err)
	}
	return r, nil
}

// ReadSysctl reads one guard file under procRoot without changing it.
func ReadSysctl(procRoot, file string) (Sysctl, error) {
	s := Sysctl{Path: filepath.Join(procRoot, file)}
	b, err := os.ReadFile(s.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("read %s: %w", s.Path, err)
	}
	s.Present = true
	s.Before = strings.TrimSpace(string(b))
	s.After = s.Before
	return s, nil
}

// ensure writes want to file when it is present and not ok, then reads it back to check.
func ensure(procRoot, file string, ok func(string) bool, want string) (Sysctl, error) {
	s, err := ReadSysctl(procRoot, file)
	if err != nil || !s.Present || ok(s.Before) {
		return s, err
	}
	// O_WRONLY without O_CREATE or O_TRUNC: a sysctl is written in place, never created.
	f, err := os.OpenFile(s.Path, os.O_WRONLY, 0)
	if err != nil {
		return s, fmt.Errorf("open %s to write %q (was %q): %w", s.Path, want, s.Before, err)
	}
	_, werr := f.WriteString(want + "\n")
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return s, fmt.Errorf("write %q to %s (was %q): %w", want, s.Path, s.Before, err)
	}
	after, err := ReadSysctl(procRoot, file)
	if err != nil {
		return s, err
	}
	s.After = after.Before
	if !ok(s.After) {
		return s, fmt.Errorf("%s reads %q after writing %q", s.Path, s.After, want)
	}
	return s, nil
}
