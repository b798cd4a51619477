package pinning

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/podapi"
)

// Annotation keys, podfence's first: it wins when a pod has both.
const (
	Key          = pools.DefaultDomain + "/cpus"
	CPUPoolerKey = pools.CPUPoolerDomain + "/cpus"
)

// Limits on what an annotation may ask, so that a typo is an error rather than a huge plan.
const (
	maxProcesses = 256
	maxCPUs      = topology.MaxCPUID + 1
	maxMilliCPU  = maxCPUs * 1000
)

const schemaSummary = `want a JSON array of {"container": name, "processes": [{"process": path, "args": [string], "pool": ` +
	`name, "cpus": number}]}`

// Process is one process to start in a container.
type Process struct {
	// Path is the binary: an absolute path or a name looked up in PATH. Only the last
	// process may leave it empty; it then runs the container's own command.
	Path string
	// Args follow argv[0]. For a last process without Path they follow the container's
	// own arguments.
	Args []string
	Pool string
	// CPUs is whole CPUs for an exclusive pool, millicpu for the shared pool, and ignored
	// for the default pool.
	CPUs int
}

// Type is the type of the process's pool: allocation.TypeExclusive, TypeShared or TypeDefault.
func (p Process) Type() allocation.PoolType { return pools.TypeOf(p.Pool) }

// Container is one container's entry in the annotation.
type Container struct {
	Name      string
	Processes []Process
}

// Spec is a parsed annotation: at most one entry per container, in annotation order.
type Spec struct {
	Containers []Container
}

// For returns the processes of the named container, and whether the annotation has any.
func (s Spec) For(container string) ([]Process, bool) {
	for _, c := range s.Containers {
		if c.Name == container {
			return c.Processes, true
		}
	}
	return nil, false
}

// FromAnnotations finds the pinning annotation among a pod's annotations and parses it.
// ok is false when the pod has neither key.
func FromAnnotations(annotations map[string]string) (spec Spec, ok bool, err error) {
	for _, k := range []string{Key, CPUPoolerKey} {
		if v, found := annotations[k]; found {
			spec, err = Parse(k, v)
			return spec, true, err
		}
	}
	return Spec{}, false, nil
}

// wire types are the JSON schema; cpus is a json.Number so that 1.5 gets our own message.
type wireContainer struct {
	Name      string        `json:"container"`
	Processes []wireProcess `json:"processes"`
}

type wireProcess struct {
	Path string      `json:"process"`
	Args []string    `json:"args"`
	Pool string      `json:"pool"`
	CPUs json.Number `json:"cpus"`
}

// Parse parses the value of the annotation named key (used in errors only). Every error is
// an *podapi.AnnotationError whose Err names the container, process and field at fault.
func Parse(key, value string) (Spec, error) {
	spec, err := parse(value)
	if err != nil {
		return Spec{}, &podapi.AnnotationError{Key: key, Value: value, Err: err}
	}
	return spec, nil
}

func parse(value string) (Spec, error) {
	dec := json.NewDecoder(strings.NewReader(value))
	dec.DisallowUnknownFields()
	var wire []wireContainer
	if err := dec.Decode(&wire); err != nil {
		return Spec{}, fmt.Errorf("%w (%s)", jsonError(err), schemaSummary)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Spec{}, fmt.Errorf("data after the JSON array (%s)", schemaSummary)
	}
	spec := Spec{Containers: make([]Container, 0, len(wire))}
	seen := map[string]bool{}
	for i, wc := range wire {
		c, err := parseContainer(wc)
		if err != nil {
			return Spec{}, fmt.Errorf("entry %d: %w", i, err)
		}
		if seen[c.Name] {
			return Spec{}, fmt.Errorf("entry %d: container %q has more than one entry (want one per container)", i, c.Name)
		}
		seen[c.Name] = true
		spec.Containers = append(spec.Containers, c)
	}
	return spec, nil
}

func jsonError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("invalid JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "the annotation"
		}
		return fmt.Errorf("%s: got a JSON %s, want %s", field, te.Value, jsonKind(te.Type))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("truncated or empty JSON")
	}
	return err
}

func jsonKind(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[json.Number]():
		return "number"
	case t.Kind() == reflect.Slice:
		return "an array"
	case t.Kind() == reflect.Struct:
		return "an object"
	}
	return "a " + t.Kind().String()
}

func parseContainer(wc wireContainer) (Container, error) {
	if wc.Name == "" {
		return Container{}, errors.New(`"container" is missing or empty (want the container's name)`)
	}
	c := Container{Name: wc.Name, Processes: make([]Process, 0, len(wc.Processes))}
	if len(wc.Processes) == 0 || len(wc.Processes) > maxProcesses {
		return Container{}, fmt.Errorf("container %q: has %d processes (want 1 to %d)", wc.Name, len(wc.Processes), maxProcesses)
	}
	pool := map[allocation.PoolType]string{} // type → the pool name first seen
	for i, wp := range wc.Processes {
		p, err := parseProcess(wp, i == len(wc.Processes)-1)
		if err != nil {
			return Container{}, fmt.Errorf("container %q: process %d: %w", wc.Name, i, err)
		}
		t := p.Type()
		// A node has one shared pool; a container may have CPUs of several exclusive pools.
		if first, ok := pool[t]; ok && first != p.Pool && t == allocation.TypeShared {
			return Container{}, fmt.Errorf("container %q: process %d: pool %q: another process names %s pool %q (a container has CPUs "+
				"of one %s pool)", wc.Name, i, p.Pool, t, first, t)
		}
		pool[t] = p.Pool
		c.Processes = append(c.Processes, p)
	}
	return c, nil
}

func parseProcess(wp wireProcess, last bool) (Process, error) {
	p := Process{Path: wp.Path, Pool: wp.Pool}
	if len(wp.Args) > 0 {
		p.Args = wp.Args
	}
	if p.Path == "" && !last {
		return Process{}, errors.New(`"process" is missing or empty (want a binary; only the last process may omit it to run the ` +
			`container's own command)`)
	}
	if _, ok := pools.ParseResourceName(pools.ResourceName(p.Pool)); !ok {
		return Process{}, fmt.Errorf(`pool %q: want a pool name ([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, at most 63 characters)`, p.Pool)
	}
	n, err := parseCPUs(wp.CPUs, p.Type())
	if err != nil {
		got := string(wp.CPUs)
		if got == "" {
			got = "missing"
		}
		return Process{}, fmt.Errorf("pool %q: cpus %s: %w", p.Pool, got, err)
	}
	p.CPUs = n
	return p, nil
}

func parseCPUs(num json.Number, poolType allocation.PoolType) (int, error) {
	lo, hi, unit := 1, maxCPUs, "a whole number of CPUs"
	switch poolType {
	case allocation.TypeShared:
		hi, unit = maxMilliCPU, "a whole number of millicpu (1000 = one CPU)"
	case allocation.TypeDefault:
		lo, unit = 0, "a whole number (ignored for the default pool)"
	}
	if num == "" && poolType == allocation.TypeDefault {
		return 0, nil
	}
	n, err := strconv.Atoi(string(num))
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("want %s from %d to %d", unit, lo, hi)
	}
	return n, nil
}

// Encode returns the annotation value for containers, in the form Parse reads.
func Encode(containers ...Container) string {
	wire := make([]wireContainer, len(containers))
	for i, c := range containers {
		wire[i] = wireContainer{Name: c.Name, Processes: make([]wireProcess, len(c.Processes))}
		for j, p := range c.Processes {
			args := p.Args
			if args == nil {
				args = []string{}
			}
			wire[i].Processes[j] = wireProcess{Path: p.Path, Args: args, Pool: p.Pool, CPUs: json.Number(strconv.Itoa(p.CPUs))}
		}
	}
	b, _ := json.Marshal(wire) // cannot fail: strings, string slices and decimal numbers
	return string(b)
}
