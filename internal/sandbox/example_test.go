package sandbox_test

import (
	"fmt"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/sandbox"
)

// A Kata pod with the RuntimeClass overhead 250m CPU / 160Mi, before and after its two
// containers: one on the default pool with a 500m limit expressed in a 50ms period, one on
// a shared pool with podfence's 250m quota.
func ExampleSize() {
	overhead := sandbox.Resources{Quota: 25000, Period: 100000, Memory: 160 << 20}
	defaultPool := cpuset.New(0)
	empty := sandbox.Size(overhead, nil, defaultPool)
	fmt.Printf("empty:  cpus %s, quota %dµs/%dµs, memory %dMi\n", empty.CPUs, empty.Quota, sandbox.Period, empty.Memory>>20)

	members := []sandbox.Member{
		{Resources: sandbox.Resources{Quota: 25000, Period: 50000, Memory: 64 << 20}, CPUs: cpuset.New(0), Mems: cpuset.New(0)},
		{Resources: sandbox.Resources{Quota: 25000, Period: 100000, Memory: 32 << 20}, CPUs: cpuset.New(1), Mems: cpuset.New(0)},
	}
	full := sandbox.Size(overhead, members, defaultPool)
	fmt.Printf("two:    cpus %s, quota %dµs/%dµs, memory %dMi\n", full.CPUs, full.Quota, sandbox.Period, full.Memory>>20)

	members = append(members, sandbox.Member{Resources: sandbox.Resources{Memory: 8 << 20}, CPUs: cpuset.New(0)})
	open := sandbox.Size(overhead, members, defaultPool)
	fmt.Printf("+ no CPU limit: quota %d (none), memory %dMi\n", open.Quota, open.Memory>>20)
	// Output:
	// empty:  cpus 0, quota 25000µs/100000µs, memory 160Mi
	// two:    cpus 0-1, quota 100000µs/100000µs, memory 256Mi
	// + no CPU limit: quota 0 (none), memory 264Mi
}

// Which host processes are a Kata pod's: the shim that parents the reported hypervisor,
// and everything below it.
func ExampleMembers() {
	table := []sandbox.Proc{
		{PID: 1000, PPID: 1, Comm: "containerd-shim"},
		{PID: 1010, PPID: 1000, Comm: "virtiofsd"},
		{PID: 1020, PPID: 1000, Comm: "qemu-system-x86"},
	}
	fmt.Println(sandbox.Members(table, 1020, nil))
	// Output: [1000 1010 1020]
}
