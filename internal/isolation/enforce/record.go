package enforce

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/isolation"
	"github.com/podfence/podfence/internal/regfile"
)

// RecordFile is the record's name in the agent's state directory.
const RecordFile = "isolation.json"

// maxRecordBytes bounds the record read back (a few bytes per IRQ).
const maxRecordBytes = 1 << 20

// record is what the node had before podfence changed it, kept on disk so that an agent
// restarted after a crash gives back exactly that: each IRQ's affinity, the default one,
// the workqueue cpumask, and the cgroups whose cpuset.cpus.exclusive it set.
type record struct {
	IRQs      map[int]cpuset.CPUSet
	Default   cpuset.CPUSet
	Workqueue cpuset.CPUSet
	HasWQ     bool
	Exclusive []string // cgroup paths
	// NoIRQ and Isolated are the CPUs taken out of interrupts and of the workqueue mask now:
	// an agent that restarts with them non-empty gives back what no running container needs.
	NoIRQ, Isolated cpuset.CPUSet
}

type recordJSON struct {
	IRQs      map[string]string `json:"irqs"`
	Default   string            `json:"default"`
	Workqueue *string           `json:"workqueue,omitempty"`
	Exclusive []string          `json:"exclusive,omitempty"`
	NoIRQ     string            `json:"noIRQ,omitempty"`
	Isolated  string            `json:"isolated,omitempty"`
}

func (r record) baseline() isolation.IRQBaseline {
	return isolation.IRQBaseline{IRQs: r.IRQs, Default: r.Default}
}

func (r record) MarshalJSON() ([]byte, error) {
	j := recordJSON{IRQs: map[string]string{}, Default: r.Default.String(), Exclusive: r.Exclusive,
		NoIRQ: r.NoIRQ.String(), Isolated: r.Isolated.String()}
	for irq, c := range r.IRQs {
		j.IRQs[strconv.Itoa(irq)] = c.String()
	}
	if r.HasWQ {
		s := r.Workqueue.String()
		j.Workqueue = &s
	}
	return json.Marshal(j)
}

func (r *record) UnmarshalJSON(b []byte) error {
	var j recordJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	r.IRQs = make(map[int]cpuset.CPUSet, len(j.IRQs))
	for k, v := range j.IRQs {
		irq, err := strconv.Atoi(k)
		if err != nil || irq < 0 {
			return fmt.Errorf("irqs: key %q is not an IRQ number", k)
		}
		if r.IRQs[irq], err = topology.ParseCPUList(v); err != nil {
			return fmt.Errorf("irqs: IRQ %d: %w", irq, err)
		}
	}
	var err error
	if r.Default, err = topology.ParseCPUList(j.Default); err != nil {
		return fmt.Errorf("default: %w", err)
	}
	if j.Workqueue != nil {
		r.HasWQ = true
		if r.Workqueue, err = topology.ParseCPUList(*j.Workqueue); err != nil {
			return fmt.Errorf("workqueue: %w", err)
		}
	}
	r.Exclusive = j.Exclusive
	if r.NoIRQ, err = topology.ParseCPUList(j.NoIRQ); err != nil {
		return fmt.Errorf("noIRQ: %w", err)
	}
	if r.Isolated, err = topology.ParseCPUList(j.Isolated); err != nil {
		return fmt.Errorf("isolated: %w", err)
	}
	return nil
}

// loadRecord reads the record in dir; ok false when there is none.
func loadRecord(dir string) (r record, ok bool, err error) {
	file := filepath.Join(dir, RecordFile)
	b, err := regfile.ReadFileMax(file, maxRecordBytes)
	if errors.Is(err, os.ErrNotExist) {
		return record{}, false, nil
	}
	if err != nil {
		return record{}, false, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return record{}, false, fmt.Errorf("isolation record %s: %w (remove it to take the node's current affinity as it was)", file, err)
	}
	return r, true, nil
}

// saveRecord writes r to dir atomically and durably.
func saveRecord(dir string, r record) error {
	slices.Sort(r.Exclusive)
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return regfile.WriteAtomic(dir, RecordFile, b)
}

// removeRecord removes the record: nothing is changed any more.
func removeRecord(dir string) error {
	err := os.Remove(filepath.Join(dir, RecordFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
