package enforce

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(body), 0o644))
	}
}

// TestCgroupLayouts: the hierarchy chosen at a root, a container's processes, and a task's
// cgroup read back from /proc/<pid>/cgroup, on both layouts.
func TestCgroupLayouts(t *testing.T) {
	const path = "/kubepods.slice/kubepods-pod1.slice/cri-containerd-c1.scope"
	for _, tc := range []struct {
		name     string
		files    map[string]string
		want     string
		procFile string
	}{
		{name: "v2", want: "cgroup v2 at ",
			files:    map[string]string{"cgroup.controllers": "cpu pids\n", path + "/cgroup.procs": "42\n43\n"},
			procFile: "0::" + path + "\n"},
		{name: "v1", want: "cgroup v1 pids at ",
			files: map[string]string{"cpu,cpuacct/cgroup.procs": "", "pids/cgroup.procs": "1\n",
				"pids" + path + "/cgroup.procs": "42\n43\n", "unified/cgroup.controllers": ""},
			procFile: "12:cpu,cpuacct:/elsewhere\n5:pids:" + path + "\n1:name=systemd:" + path + "\n0::/\n"},
		{name: "v1 without pids: cpu,cpuacct", want: "cgroup v1 cpu,cpuacct at ",
			files:    map[string]string{"cpu,cpuacct" + path + "/cgroup.procs": "42\n43\n", "cpu,cpuacct/cgroup.procs": ""},
			procFile: "4:cpu,cpuacct:" + path + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, tc.files)
			cg, err := detectCgroups(root)
			must(t, err)
			if got := cg.String(); got != tc.want+root {
				t.Errorf("layout %q, want %q", got, tc.want+root)
			}
			p, err := cg.pathOf("kubepods-pod1.slice:cri-containerd:c1")
			must(t, err)
			if pids, err := cg.procs(p); err != nil || !slices.Equal(pids, []int{42, 43}) {
				t.Errorf("procs(%s) = %v, %v", p, pids, err)
			}
			if got, ok := cg.taskCgroup([]byte(tc.procFile)); !ok || got != path {
				t.Errorf("taskCgroup = %q %v, want %q", got, ok, path)
			}
		})
	}
	if _, err := detectCgroups(t.TempDir()); err == nil {
		t.Error("an empty root: want an error")
	}
}

func TestStartTime(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"7/stat": "7 (a) (b) S 1 7 7 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 12345 0 0\n",
		"8/stat": "8 (short) S 1\n",
		"9/stat": "9 (exact) S 1 9 9 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 777\n", // field 22 the last
	})
	p := procFS{root: root}
	if v, err := p.startTime(7); err != nil || v != 12345 {
		t.Errorf("startTime(7) = %d, %v; want 12345 despite ') (' in the command", v, err)
	}
	if v, err := p.startTime(9); err != nil || v != 777 {
		t.Errorf("startTime(9) = %d, %v; want 777 from a stat that ends at field 22", v, err)
	}
	if _, err := p.startTime(8); err == nil {
		t.Error("startTime(8): want an error for a short stat")
	}
}
