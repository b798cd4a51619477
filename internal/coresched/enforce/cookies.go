package enforce

import (
	"fmt"

	"github.com/podfence/podfence/internal/coresched/kernel"
)

// ThreadCookie is the cookie of one thread, or why it could not be read.
type ThreadCookie struct {
	Pid, Tid int
	Cookie   kernel.Cookie
	Err      error
}

// ReadCookies reads the cookie of every thread of each process in pids (from procRoot's
// task lists), for checking a node: `podfence coresched get`. A process that cannot be
// listed gives one entry with Tid 0 and the error.
func ReadCookies(k interface {
	Get(pid int) (kernel.Cookie, error)
}, procRoot string, pids []int) []ThreadCookie {
	var out []ThreadCookie
	for _, pid := range pids {
		tids, err := procFS{root: procRoot}.threads(pid)
		if err != nil {
			out = append(out, ThreadCookie{Pid: pid, Err: fmt.Errorf("process %d: %w", pid, err)})
			continue
		}
		for _, tid := range tids {
			c, err := k.Get(tid)
			out = append(out, ThreadCookie{Pid: pid, Tid: tid, Cookie: c, Err: err})
		}
	}
	return out
}
