package kernel

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// fakeProc writes the given guard files (relative path → content) under a temp proc root.
func fakeProc(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestGuard(t *testing.T) {
	absent := Sysctl{}
	tests := []struct {
		name      string
		files     map[string]string
		gi, core  Sysctl // expected, Path filled in by the test when Present
		giChanged bool
	}{
		{name: "mainline: neither file", gi: absent, core: absent},
		{name: "group identity on is turned off",
			files: map[string]string{GroupIdentityFile: "1\n"},
			gi:    Sysctl{Present: true, Before: "1", After: "0"}, core: absent, giChanged: true},
		{name: "group identity off is left alone",
			files: map[string]string{GroupIdentityFile: "0\n"},
			gi:    Sysctl{Present: true, Before: "0", After: "0"}, core: absent},
		{name: "sched_core off is turned on",
			files: map[string]string{GroupIdentityFile: "0\n", SchedCoreFile: "0\n"},
			gi:    Sysctl{Present: true, Before: "0", After: "0"},
			core:  Sysctl{Present: true, Before: "0", After: "1"}},
		{name: "both already right",
			files: map[string]string{GroupIdentityFile: "0", SchedCoreFile: "1"},
			gi:    Sysctl{Present: true, Before: "0", After: "0"},
			core:  Sysctl{Present: true, Before: "1", After: "1"}},
		{name: "both fixed",
			files: map[string]string{GroupIdentityFile: "1\n", SchedCoreFile: "0\n"},
			gi:    Sysctl{Present: true, Before: "1", After: "0"},
			core:  Sysctl{Present: true, Before: "0", After: "1"}, giChanged: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := fakeProc(t, tt.files)
			r, err := Guard(root)
			if err != nil {
				t.Fatalf("Guard: %v", err)
			}
			tt.gi.Path = filepath.Join(root, GroupIdentityFile)
			tt.core.Path = filepath.Join(root, SchedCoreFile)
			if r.GroupIdentity != tt.gi {
				t.Errorf("group identity: got %+v, want %+v", r.GroupIdentity, tt.gi)
			}
			if r.SchedCore != tt.core {
				t.Errorf("sched_core: got %+v, want %+v", r.SchedCore, tt.core)
			}
			if r.GroupIdentity.Changed() != tt.giChanged {
				t.Errorf("group identity Changed() = %t", r.GroupIdentity.Changed())
			}
			// The files hold what the report says.
			for _, s := range []Sysctl{r.GroupIdentity, r.SchedCore} {
				if got, _ := ReadSysctl(root, s.Path[len(root):]); got.Before != s.After {
					t.Errorf("%s holds %q, report says %q", s.Path, got.Before, s.After)
				}
			}
		})
	}
}

// A Group Identity file that cannot be written: a symlink to a read-only sysctl, which refuses
// writes even from root. Its content is not "0", so the guard tries and must report failure.
func TestGuardWriteFails(t *testing.T) {
	const readOnly = "/proc/sys/kernel/osrelease"
	if _, err := os.Stat(readOnly); err != nil {
		t.Skipf("need %s: %v", readOnly, err)
	}
	root := fakeProc(t, map[string]string{SchedCoreFile: "0\n"})
	if err := os.Symlink(readOnly, filepath.Join(root, GroupIdentityFile)); err != nil {
		t.Fatal(err)
	}
	r, err := Guard(root)
	if !errors.Is(err, ErrGroupIdentityOn) {
		t.Fatalf("got %v, want errors.Is ErrGroupIdentityOn", err)
	}
	t.Logf("error: %v", err)
	if !r.GroupIdentity.Present || r.GroupIdentity.Changed() {
		t.Errorf("group identity report %+v: want present and unchanged", r.GroupIdentity)
	}
	if r.SchedCore.Present {
		t.Errorf("sched_core touched after the group identity failure: %+v", r.SchedCore)
	}
}

func TestReadSysctlError(t *testing.T) {
	root := fakeProc(t, nil)
	if err := os.MkdirAll(filepath.Join(root, GroupIdentityFile), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Guard(root)
	if !errors.Is(err, ErrGroupIdentityOn) {
		t.Fatalf("unreadable group identity file: got %v, want ErrGroupIdentityOn", err)
	}
}
