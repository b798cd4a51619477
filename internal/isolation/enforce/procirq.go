// Package enforce applies package isolation's decisions to the kernel: IRQ affinity in
// procfs, the unbound-workqueue cpumask in sysfs and cpuset partitions in cgroup v2, as an
// extension of the agent's NRI plugin (Manager). Every path is under a root passed in.
package enforce

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/isolation"
)

// ErrUnmovable is a write of an IRQ's affinity the kernel refuses with EIO: a managed or
// per-CPU interrupt, whose affinity only the kernel sets.
var ErrUnmovable = errors.New("the kernel does not let this interrupt move (managed or per-CPU)")

// ErrNotWritable is a write refused for lack of access (read-only mount, permissions).
var ErrNotWritable = errors.New("not writable here")

// ProcIRQ reads and writes interrupt affinity under Root ("/proc/irq").
type ProcIRQ struct{ Root string }

// IRQs lists the interrupts that have a directory, in order.
func (p ProcIRQ) IRQs() ([]int, error) {
	entries, err := os.ReadDir(p.Root)
	if err != nil {
		return nil, fmt.Errorf("list interrupts: %w", err)
	}
	var out []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil && e.IsDir() && n >= 0 {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Affinity reads an IRQ's smp_affinity_list.
func (p ProcIRQ) Affinity(irq int) (cpuset.CPUSet, error) {
	return readList(filepath.Join(p.Root, strconv.Itoa(irq), "smp_affinity_list"))
}

// Effective reads the CPUs an IRQ is delivered to now (effective_affinity_list; kernels
// and architectures without it: its affinity).
func (p ProcIRQ) Effective(irq int) (cpuset.CPUSet, error) {
	c, err := readList(filepath.Join(p.Root, strconv.Itoa(irq), "effective_affinity_list"))
	if errors.Is(err, os.ErrNotExist) {
		return p.Affinity(irq)
	}
	return c, err
}

// SetAffinity writes an IRQ's smp_affinity_list; ErrUnmovable or ErrNotWritable say why not.
// The kernel refuses a managed IRQ with EIO, or makes its file read-only (mode 0444), which a
// root without CAP_DAC_OVERRIDE (the agent's pod) meets as EACCES: both are ErrUnmovable.
func (p ProcIRQ) SetAffinity(irq int, cpus cpuset.CPUSet) error {
	file := filepath.Join(p.Root, strconv.Itoa(irq), "smp_affinity_list")
	err := writeFile(file, cpus.String())
	if errors.Is(err, ErrNotWritable) && errors.Is(err, syscall.EACCES) {
		if st, serr := os.Stat(file); serr == nil && st.Mode().Perm()&0o222 == 0 {
			return fmt.Errorf("write %q to %s: %w (its file is read-only)", cpus.String(), file, ErrUnmovable)
		}
	}
	return err
}

// Default reads default_smp_affinity (a hexadecimal mask): the affinity of IRQs set up later.
func (p ProcIRQ) Default() (cpuset.CPUSet, error) {
	b, err := os.ReadFile(filepath.Join(p.Root, "default_smp_affinity"))
	if err != nil {
		return cpuset.New(), err
	}
	return isolation.ParseMask(string(b))
}

// SetDefault writes default_smp_affinity.
func (p ProcIRQ) SetDefault(cpus cpuset.CPUSet) error {
	return writeFile(filepath.Join(p.Root, "default_smp_affinity"), isolation.FormatMask(cpus))
}

// Workqueue reads and writes the unbound-workqueue cpumask at Path
// ("/sys/devices/virtual/workqueue/cpumask"): the CPUs unbound kernel work may run on.
type Workqueue struct{ Path string }

func (w Workqueue) Get() (cpuset.CPUSet, error) {
	b, err := os.ReadFile(w.Path)
	if err != nil {
		return cpuset.New(), err
	}
	return isolation.ParseMask(string(b))
}

func (w Workqueue) Set(cpus cpuset.CPUSet) error {
	return writeFile(w.Path, isolation.FormatMask(cpus))
}

func readList(file string) (cpuset.CPUSet, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return cpuset.New(), err
	}
	c, err := topology.ParseCPUList(strings.TrimSpace(string(b)))
	if err != nil {
		return cpuset.New(), fmt.Errorf("%s: %w", file, err)
	}
	return c, nil
}

// writeFile writes value to an existing kernel file in one write, classifying refusals.
func writeFile(file, value string) error {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_TRUNC, 0)
	if err == nil {
		_, err = f.WriteString(value)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.EIO):
		return fmt.Errorf("write %q to %s: %w", value, file, ErrUnmovable)
	case errors.Is(err, syscall.EROFS), errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return fmt.Errorf("write %q to %s: %w: %w", value, file, ErrNotWritable, err)
	}
	return fmt.Errorf("write %q to %s: %w", value, file, err)
}
