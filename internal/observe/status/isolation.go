package status

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// SectionIsolation is the "isolation" section (package isolation/enforce).
const SectionIsolation = "isolation"

// Isolation is what the agent keeps off exclusive CPUs beyond the cpuset: device interrupts,
// the load balancer and unbound kernel work.
type Isolation struct {
	// NoIRQCPUs: the CPUs no movable device interrupt reaches now; UnmovableIRQs: interrupts
	// the kernel does not let move; IRQError: why affinity cannot be set ("" when it can).
	NoIRQCPUs     string `json:"noIRQCPUs,omitempty"`
	UnmovableIRQs []int  `json:"unmovableIRQs,omitempty"`
	IRQError      string `json:"irqError,omitempty"`
	// IRQBalance names a running irqbalance, which may move interrupts back (podfence does
	// not fight it: ban the CPUs in its configuration).
	IRQBalance string `json:"irqbalance,omitempty"`
	// Partitions: whether this node can make isolated partitions, and if not why.
	Partitions       bool   `json:"partitions"`
	PartitionsReason string `json:"partitionsReason,omitempty"`
	// IsolatedCPUs are the CPUs of isolated partitions, kept off the unbound workqueues.
	IsolatedCPUs   string               `json:"isolatedCPUs,omitempty"`
	WorkqueueError string               `json:"workqueueError,omitempty"`
	Containers     []IsolationContainer `json:"containers,omitempty"`
}

// IsolationContainer is one running container that asked for isolation.
type IsolationContainer struct {
	Namespace     string   `json:"namespace"`
	Pod           string   `json:"pod"`
	Container     string   `json:"container"`
	CPUs          string   `json:"cpus"`
	NoIRQs        bool     `json:"noIRQs,omitempty"`
	NoLoadBalance bool     `json:"noLoadBalance,omitempty"`
	Partition     string   `json:"partition,omitempty"` // cpuset.cpus.partition as read
	Degraded      []string `json:"degraded,omitempty"`  // what it lacks of what it asked
}

// writeIsolation renders the isolation section; nothing when no container asked and all is well.
func writeIsolation(w io.Writer, r *Report) error {
	var iso Isolation
	if err := r.Section(SectionIsolation, &iso); err != nil {
		return err
	}
	if len(iso.Containers) == 0 && iso.IRQError == "" && iso.WorkqueueError == "" {
		return nil
	}
	fmt.Fprintln(w, "\nIsolation beyond the cpuset")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	irq := "off CPUs " + orNone(iso.NoIRQCPUs)
	if len(iso.UnmovableIRQs) > 0 {
		irq += fmt.Sprintf("; %d the kernel will not move: %v", len(iso.UnmovableIRQs), iso.UnmovableIRQs)
	}
	if iso.IRQError != "" {
		irq += "; cannot set: " + iso.IRQError
	}
	if iso.IRQBalance != "" {
		irq += "; " + iso.IRQBalance
	}
	fmt.Fprintf(tw, "  interrupts\t%s\n", irq)
	part := "yes"
	if !iso.Partitions {
		part = "no: " + iso.PartitionsReason
	}
	fmt.Fprintf(tw, "  isolated partitions\t%s\n", part)
	wq := "off CPUs " + orNone(iso.IsolatedCPUs)
	if iso.WorkqueueError != "" {
		wq += "; " + iso.WorkqueueError
	}
	fmt.Fprintf(tw, "  unbound workqueues\t%s\n", wq)
	for _, c := range iso.Containers {
		var asked []string
		if c.NoIRQs {
			asked = append(asked, "no interrupts")
		}
		if c.NoLoadBalance {
			asked = append(asked, "isolated partition ("+orNone(c.Partition)+")")
		}
		state := "ok"
		if len(c.Degraded) > 0 {
			state = "degraded: " + strings.Join(c.Degraded, "; ")
		}
		fmt.Fprintf(tw, "  %s/%s %s\tCPUs %s\t%s\t%s\n", c.Namespace, c.Pod, c.Container, c.CPUs, strings.Join(asked, ", "), state)
	}
	return tw.Flush()
}
