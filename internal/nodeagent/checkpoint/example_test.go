package checkpoint_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/nodeagent/checkpoint"
)

func Example() {
	dir, err := os.MkdirTemp("", "podfence-checkpoint")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	store, err := checkpoint.Open(filepath.Join(dir, "checkpoint"))
	if err != nil {
		log.Fatal(err)
	}
	// Each change is one line appended to the journal.
	a := allocation.Allocation{PodUID: "0b9c5b1e-4a0e-4d5c-9a51-1f0e0c2f7a11", Container: "app",
		Pool: "exclusive_a", Type: allocation.TypeExclusive, CPUs: cpuset.New(4, 5)}
	if err := store.Put(a); err != nil {
		log.Fatal(err)
	}

	// At start-up: load, then refuse to run if the node no longer fits the records.
	allocs, err := store.Load()
	if err != nil {
		log.Fatal(err)
	}
	pools := map[string]cpuset.CPUSet{"exclusive_a": cpuset.New(2, 3, 4)}
	for _, c := range checkpoint.Validate(allocs, cpuset.New(0, 1, 2, 3, 4, 5), pools) {
		fmt.Printf("%s: %s\n", c.Key, c.Reason)
	}
	// Output:
	// 0b9c5b1e-4a0e-4d5c-9a51-1f0e0c2f7a11/app: CPU 5 of pool "exclusive_a" is now in no pool: restore the pool config, or drain the node and delete allocations.jsonl
}
