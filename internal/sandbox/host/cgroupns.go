package host

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// MigrationBlocked says why this process cannot move other processes between cgroups of the
// unified (v2) hierarchy, or returns "" when nothing it can see stands in the way: on a
// cgroup2 mount with nsdelegate (systemd's default) the kernel refuses, with ENOENT, a
// migration whose source or destination lies outside the writer's cgroup namespace, and a
// container that is not privileged gets a cgroup namespace of its own on cgroup v2. proc is
// the host's /proc (the agent runs in the host PID namespace: pid 1 is the host's init).
func MigrationBlocked(proc string) string {
	self, err1 := os.Readlink(filepath.Join(proc, "self/ns/cgroup"))
	host, err2 := os.Readlink(filepath.Join(proc, "1/ns/cgroup"))
	if err1 != nil || err2 != nil || self == host {
		return ""
	}
	f, err := os.Open(filepath.Join(proc, "self/mountinfo"))
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "36 35 0:30 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate": the super
		// options follow the file system type after " - ".
		_, after, ok := strings.Cut(sc.Text(), " - ")
		fields := strings.Fields(after)
		if !ok || len(fields) < 3 || fields[0] != "cgroup2" {
			continue
		}
		for _, o := range strings.Split(fields[2], ",") {
			if o == "nsdelegate" {
				return fmt.Sprintf("the agent runs in a cgroup namespace of its own (%s, the host's %s) and cgroup2 is "+
					"mounted with nsdelegate: the kernel refuses to move processes outside that namespace, so VM "+
					"sandbox processes stay where they are; run the agent privileged (deploy/agent-privileged, Helm "+
					"agent.privileged=true), which gives it the host's cgroup namespace", self, host)
			}
		}
	}
	return ""
}
