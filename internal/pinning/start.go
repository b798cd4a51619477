package pinning

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/topology"
)

// Environment that podfence start reads. The agent sets all four (Wrap sets the first two);
// EXCLUSIVE_CPUS and SHARED_CPUS hold the container's CPUs as a CPU list ("2,3" or "2-3").
const (
	EnvPinning       = "PODFENCE_PINNING"   // annotation JSON holding the container's entry
	EnvContainer     = "PODFENCE_CONTAINER" // the container's name in that JSON
	EnvExclusiveCPUs = "EXCLUSIVE_CPUS"     // same as plan.EnvExclusiveCPUs
	EnvSharedCPUs    = "SHARED_CPUS"        // same as plan.EnvSharedCPUs
)

// Command is a program to run.
type Command struct {
	Path string   // an absolute path or a name looked up in PATH; also argv[0]
	Args []string // arguments after argv[0]
	Env  []string // KEY=VALUE
}

// Affinity sets CPU affinity (sched_setaffinity(2)).
type Affinity interface {
	// Get returns the affinity of thread tid; 0 is the calling thread.
	Get(tid int) (cpuset.CPUSet, error)
	// Set sets the affinity of thread tid; 0 is the calling thread.
	Set(tid int, cpus cpuset.CPUSet) error
}

// Execer runs commands from the calling thread, so that they inherit its affinity.
type Execer interface {
	// Start forks and execs c, and returns the child's PID.
	Start(c Command) (pid int, err error)
	// Exec replaces the current process with c. It returns only when it fails.
	Exec(c Command) error
	// Kill kills a process that Start started.
	Kill(pid int) error
}

// Starter is podfence start: it runs a container's processes, each on its CPUs.
type Starter struct {
	Affinity Affinity
	Execer   Execer
	Log      *slog.Logger // nil: no log
}

// Start reads the container's processes and CPUs from environ (see EnvPinning), plans them
// (Plan), forks every process but the last pinned to its CPUs, then execs the last one
// pinned to its CPUs. command is the container's own command, run by a last process that
// names no binary. Every process gets environ as its environment.
//
// With a real Execer, Start returns only on failure; it then kills what it started. Errors
// name the container, and for too few CPUs, the numbers.
func (s Starter) Start(environ, command []string) error {
	env := lookup(environ)
	name := env(EnvContainer)
	if name == "" {
		return fmt.Errorf("%s is not set: podfence start runs as the entrypoint wrapper the podfence agent sets up", EnvContainer)
	}
	cmds, assign, err := prepare(env, environ, command)
	if err != nil {
		return fmt.Errorf("container %q: %w", name, err)
	}
	var started []int
	fail := func(i int, err error) error {
		err = fmt.Errorf("container %q: process %d (%s): %w", name, i, assign[i].Process.name(), err)
		for _, pid := range started {
			if kerr := s.Execer.Kill(pid); kerr != nil {
				err = errors.Join(err, fmt.Errorf("kill process %d: %w", pid, kerr))
			}
		}
		return err
	}
	last := len(cmds) - 1
	for i, c := range cmds[:last] {
		pid, err := s.startPinned(assign[i].CPUs, c)
		if err != nil {
			return fail(i, err)
		}
		started = append(started, pid)
		s.log("started pinned process", name, i, c, assign[i], "pid", pid)
	}
	s.log("exec pinned process", name, last, cmds[last], assign[last])
	_, err = s.onPinnedThread(assign[last].CPUs, func() (int, error) { return 0, s.Execer.Exec(cmds[last]) })
	if err != nil {
		return fail(last, err)
	}
	return nil
}

// prepare parses and plans the processes, and builds their commands.
func prepare(env func(string) string, environ, command []string) ([]Command, []Assignment, error) {
	value, name := env(EnvPinning), env(EnvContainer)
	if value == "" {
		return nil, nil, fmt.Errorf("%s is not set or empty (want the pinning annotation's JSON)", EnvPinning)
	}
	spec, err := Parse(EnvPinning, value)
	if err != nil {
		return nil, nil, err
	}
	procs, ok := spec.For(name)
	if ok && len(procs) == 0 {
		return nil, nil, fmt.Errorf("%s lists no process for this container", EnvPinning)
	}
	if !ok {
		return nil, nil, fmt.Errorf("%s has no entry for this container (%s names %s)", EnvPinning, EnvPinning, names(spec))
	}
	var sets [2]cpuset.CPUSet
	for i, v := range []string{EnvExclusiveCPUs, EnvSharedCPUs} {
		if sets[i], err = topology.ParseCPUList(env(v)); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", v, err)
		}
	}
	assign, err := Plan(procs, sets[0], sets[1])
	if err != nil {
		return nil, nil, err
	}
	cmds := make([]Command, len(assign))
	for i, a := range assign {
		cmds[i] = Command{Path: a.Process.Path, Args: a.Process.Args, Env: environ}
	}
	if last := &cmds[len(cmds)-1]; last.Path == "" {
		if len(command) == 0 || command[0] == "" {
			return nil, nil, errors.New(`the last process names no "process" and there is no container command after "--" to run instead`)
		}
		last.Path, last.Args = command[0], append(append([]string(nil), command[1:]...), last.Args...)
	}
	return cmds, assign, nil
}

// startPinned forks and execs c from a thread pinned to cpus, so the child starts pinned.
func (s Starter) startPinned(cpus cpuset.CPUSet, c Command) (int, error) {
	return s.onPinnedThread(cpus, func() (int, error) { return s.Execer.Start(c) })
}

// onPinnedThread runs fn on a new goroutine locked to its OS thread, with the thread's
// affinity set to cpus (empty: left alone) and restored afterwards. If the affinity cannot
// be restored the thread stays locked, and Go ends it with the goroutine (or parks it for
// good, for the main thread), so no goroutine runs later with the narrowed mask.
func (s Starter) onPinnedThread(cpus cpuset.CPUSet, fn func() (int, error)) (int, error) {
	type result struct {
		v   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		v, clean, err := s.pinned(cpus, fn)
		if clean {
			runtime.UnlockOSThread()
		}
		done <- result{v, err}
	}()
	r := <-done
	return r.v, r.err
}

// pinned runs fn with the calling thread pinned to cpus. clean says the thread's affinity
// is as it was before.
func (s Starter) pinned(cpus cpuset.CPUSet, fn func() (int, error)) (v int, clean bool, err error) {
	if cpus.IsEmpty() {
		v, err = fn()
		return v, true, err
	}
	old, err := s.Affinity.Get(0)
	if err != nil {
		return 0, true, fmt.Errorf("read CPU affinity: %w", err)
	}
	if err := s.Affinity.Set(0, cpus); err != nil {
		return 0, false, fmt.Errorf("set CPU affinity to %s: %w", cpus, err)
	}
	v, err = fn()
	return v, s.Affinity.Set(0, old) == nil, err
}

func (s Starter) log(msg, container string, i int, c Command, a Assignment, kv ...any) {
	if s.Log == nil {
		return
	}
	cpus := a.CPUs.String()
	if a.CPUs.IsEmpty() {
		cpus = "unpinned"
	}
	s.Log.Info(msg, append([]any{"container", container, "index", i, "process", c.Path, "pool", a.Process.Pool, "cpus", cpus}, kv...)...)
}

// lookup returns a getenv over environ (KEY=VALUE; the first one wins, as in os.Getenv).
func lookup(environ []string) func(string) string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if _, dup := m[k]; !dup {
				m[k] = v
			}
		}
	}
	return func(k string) string { return m[k] }
}

func names(s Spec) string {
	if len(s.Containers) == 0 {
		return "no container"
	}
	q := make([]string, len(s.Containers))
	for i, c := range s.Containers {
		q[i] = fmt.Sprintf("%q", c.Name)
	}
	return strings.Join(q, ", ")
}
