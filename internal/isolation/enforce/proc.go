package enforce

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// findProcess returns the PID of a process whose comm is name under procfs root, or 0.
func findProcess(root, name string) int {
	entries, err := os.ReadDir(root)
	if err != nil {
		return 0
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, e.Name(), "comm"))
		if err == nil && strings.TrimSpace(string(b)) == name {
			return pid
		}
	}
	return 0
}
