package cgroups

import (
	"errors"
	"path/filepath"
	"testing"
)

// TestCPUIdleDir: cpu.idle is found in the v2 hierarchy when the root lists the cpu
// controller; v1, or v2 without cpu, has none (ErrNoCPUIdle naming the root).
func TestCPUIdleDir(t *testing.T) {
	v2, err := Detect(filepath.Join("testdata", "cgroup", "v2"))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := v2.CPUIdleDir("/kubepods.slice/kubepods-besteffort.slice")
	if want := filepath.Join("testdata", "cgroup", "v2", "kubepods.slice/kubepods-besteffort.slice"); err != nil || dir != want {
		t.Errorf("v2: %q, %v; want %q", dir, err, want)
	}
	v1, err := Detect(filepath.Join("testdata", "cgroup", "v1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		l    Layout
		want string
	}{
		{name: "v1", l: v1, want: "no cpu.idle: cgroup v1 at testdata/cgroup/v1 has none (it is a cgroup v2 file, Linux 5.15)"},
		{name: "v2 without cpu", l: Layout{Root: "/r", Version: V2, dirs: map[string]string{"memory": ""}},
			want: "no cpu.idle: the cgroup v2 root /r does not list the cpu controller (available: memory)"},
		{name: "nothing detected", l: Layout{}, want: "no cpu.idle: no cgroup layout detected"},
	} {
		if _, err := tc.l.CPUIdleDir("/kubepods"); !errors.Is(err, ErrNoCPUIdle) || err.Error() != tc.want {
			t.Errorf("%s: %v\nwant %s", tc.name, err, tc.want)
		}
	}
	if _, err := v2.CPUIdleDir("kubepods"); err == nil {
		t.Error("a relative path: no error")
	}
}

// TestParentPath: both drivers' pod cgroup parents, and what is refused.
func TestParentPath(t *testing.T) {
	for in, want := range map[string]string{
		"/kubepods/besteffort/pod1":        "/kubepods/besteffort/pod1",
		"/kubepods/pod1/":                  "/kubepods/pod1",
		"kubepods-besteffort-pod1_2.slice": "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1_2.slice",
		"kubepods-pod7d3e.slice":           "/kubepods.slice/kubepods-pod7d3e.slice",
		"-.slice":                          "/",
	} {
		if got, err := ParentPath(in); err != nil || got != want {
			t.Errorf("ParentPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"":                    `cgroup parent "": want an absolute cgroupfs path or a systemd slice (<name>.slice)`,
		"kubepods/pod1":       `cgroup parent "kubepods/pod1": want an absolute cgroupfs path or a systemd slice (<name>.slice)`,
		"kubepods--pod.slice": `cgroup parent "kubepods--pod.slice": slice "kubepods--pod.slice": empty component between '-'`,
	} {
		if _, err := ParentPath(in); err == nil || err.Error() != want {
			t.Errorf("ParentPath(%q): %v\nwant %s", in, err, want)
		}
	}
}

func FuzzParentPath(f *testing.F) {
	for _, s := range []string{"/kubepods/pod1", "kubepods-besteffort-pod1.slice", "-.slice", "a--b.slice", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParentPath(s)
		if err != nil {
			return
		}
		if !filepath.IsAbs(p) || filepath.Clean(p) != p {
			t.Fatalf("ParentPath(%q) = %q: not absolute and clean", s, p)
		}
	})
}
