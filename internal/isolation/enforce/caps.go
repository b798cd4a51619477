package enforce

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// capSysAdmin is CAP_SYS_ADMIN's bit (linux/capability.h): the kernel asks for it before it
// makes a remote partition (kernel/cgroup/cpuset.c, remote_partition_enable).
const capSysAdmin = 21

// hasCapSysAdmin says whether this process's effective capabilities hold CAP_SYS_ADMIN, read
// from procfs (/proc/self/status, CapEff).
func hasCapSysAdmin(statusFile string) bool {
	f, err := os.Open(statusFile)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<capSysAdmin) != 0
		}
	}
	return false
}
