package cgroups_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/nodeagent/cgroups"
	"github.com/podfence/podfence/internal/nodeagent/cgroups/cgroupstest"
)

func TestPath(t *testing.T) {
	const pod = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0b9c5b1e_4a0e.slice"
	for _, tc := range []struct {
		name, in string
		want     string
		driver   cgroups.Driver
		wantErr  string
	}{
		{name: "cgroupfs", in: "/kubepods/burstable/pod1/abc", want: "/kubepods/burstable/pod1/abc"},
		{name: "cgroupfs, not clean", in: "/kubepods//x/../pod1/", want: "/kubepods/pod1"},
		{name: "cgroupfs with a colon", in: "/a:b:c", want: "/a:b:c"},
		{name: "cgroupfs root", in: "/", want: "/"},
		{name: "containerd systemd", in: "kubepods-burstable-pod0b9c5b1e_4a0e.slice:cri-containerd:abc",
			want: "/" + pod + "/cri-containerd-abc.scope", driver: cgroups.Systemd},
		{name: "CRI-O systemd", in: "kubepods-burstable-pod0b9c5b1e_4a0e.slice:crio:abc",
			want: "/" + pod + "/crio-abc.scope", driver: cgroups.Systemd},
		{name: "top slice", in: "kubepods.slice:crio:abc", want: "/kubepods.slice/crio-abc.scope", driver: cgroups.Systemd},
		{name: "root slice", in: "-.slice:p:abc", want: "/p-abc.scope", driver: cgroups.Systemd},
		{name: "default slice", in: ":p:abc", want: "/system.slice/p-abc.scope", driver: cgroups.Systemd},
		{name: "empty prefix, as runc", in: "a.slice::abc", want: "/a.slice/-abc.scope", driver: cgroups.Systemd},
		{name: "name is a slice", in: "a.slice:p:a-b.slice", want: "/a.slice/a-b.slice", driver: cgroups.Systemd},

		{name: "empty", in: "", wantErr: "empty cgroups path: the runtime chooses the cgroup itself"},
		{name: "relative", in: "kubepods/pod1/abc",
			wantErr: `cgroups path "kubepods/pod1/abc": want an absolute cgroupfs path or systemd's "<slice>:<prefix>:<name>"`},
		{name: "two fields", in: "a.slice:abc", wantErr: `want an absolute cgroupfs path`},
		{name: "not a slice", in: "kubepods:crio:abc",
			wantErr: `cgroups path "kubepods:crio:abc": slice "kubepods": want a name ending in .slice, without '/'`},
		{name: "bare suffix", in: ".slice:crio:abc", wantErr: `slice ".slice": want a name ending in .slice`},
		{name: "empty slice component", in: "a--b.slice:crio:abc", wantErr: `slice "a--b.slice": empty component between '-'`},
		{name: "leading dash", in: "-a.slice:crio:abc", wantErr: `empty component between '-'`},
		{name: "no name", in: "a.slice:crio:", wantErr: `want a unit name and prefix without '/'`},
		{name: "slash in name", in: "a.slice:crio:../x", wantErr: `want a unit name and prefix without '/'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, driver, err := cgroups.Path(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Path(%q) = %q, %v; want error %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want || driver != tc.driver {
				t.Errorf("Path(%q) = %q, %s, %v; want %q, %s", tc.in, got, driver, err, tc.want, tc.driver)
			}
		})
	}
}

// TestPathInTrees resolves the trees' containers, both drivers in both layouts, to their
// misc cgroup directories, and finds their misc files there.
func TestPathInTrees(t *testing.T) {
	for _, tc := range []struct{ layout, cgroupsPath, wantDir string }{
		{"v2", cgroupstest.ContainerSystemd,
			"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0b9c5b1e_4a0e_4d5c_9a51_1f0e0c2f7a11.slice/cri-containerd-c0ffee01.scope"},
		{"v2", cgroupstest.ContainerCgroupfsV2, "kubepods/besteffort/pod7d3e2f10-8c4b-4f6a-b2d9-55a1c3e4f6b2/crio-c0ffee02"},
		{"v1", cgroupstest.ContainerSystemd,
			"misc/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0b9c5b1e_4a0e_4d5c_9a51_1f0e0c2f7a11.slice/cri-containerd-c0ffee01.scope"},
		{"v1", cgroupstest.ContainerCgroupfsV1, "misc/kubepods/besteffort/pod7d3e2f10-8c4b-4f6a-b2d9-55a1c3e4f6b2/c0ffee02"},
	} {
		root := cgroupstest.Tree(t, tc.layout)
		l, err := cgroups.Detect(root)
		if err != nil {
			t.Fatal(err)
		}
		p, _, err := cgroups.Path(tc.cgroupsPath)
		if err != nil {
			t.Fatal(err)
		}
		dir, err := l.Dir("misc", p)
		if err != nil || dir != filepath.Join(root, tc.wantDir) {
			t.Errorf("%s %s: dir %q, %v; want <root>/%s", tc.layout, tc.cgroupsPath, dir, err, tc.wantDir)
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "misc.current")); err != nil {
			t.Errorf("%s %s: %v", tc.layout, tc.cgroupsPath, err)
		}
	}
}
