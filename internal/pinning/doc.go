// Package pinning pins the processes of one container to parts of its CPUs, as CPU-Pooler's
// process starter does (https://github.com/nokia/CPU-Pooler, "Annotation").
//
// # Annotation
//
// The pod annotation podfence.io/cpus (or nokia.k8s.io/cpus; podfence's wins when both are
// set) is a JSON array with one entry per container:
//
//	[{"container": "app", "processes": [
//	  {"process": "/bin/dp",  "args": ["-c", "1"], "pool": "exclusive_caas", "cpus": 2},
//	  {"process": "/bin/ctl", "args": [],          "pool": "shared_caas",    "cpus": 200},
//	  {"process": "/bin/app", "args": ["--serve"], "pool": "exclusive_caas", "cpus": 1}]}]
//
// A pool's type comes from its name (pools.TypeOf). As in CPU-Pooler, cpus counts whole
// logical CPUs for an exclusive pool (sibling threads of a multiThreaded pool count one
// each) and millicpu for the shared pool (200 = a fifth of a CPU, summed against the
// container's shared-pool request by whoever admits the pod). For any other (default) pool
// it is ignored and may be 0. Unknown fields, fractional cpus and duplicate containers are
// errors. podfence adds one thing: the last process may leave "process" empty, and then
// runs the container's own command with its "args" appended.
//
// # CPUs
//
// Plan splits the container's CPUs, given as EXCLUSIVE_CPUS and SHARED_CPUS:
//   - exclusive processes take distinct CPUs of EXCLUSIVE_CPUS, in process order and
//     ascending CPU order; asking for more than there are is an error naming both numbers;
//   - shared processes all get the whole of SHARED_CPUS and share the container's quota;
//   - default-pool processes get what is left: the exclusive CPUs no exclusive process took
//     plus SHARED_CPUS. In a container with neither (a default-pool container) they are
//     not pinned and keep the container's cpuset.
//
// # Starting
//
// The NRI agent wraps the container's command at CreateContainer (Wrap): it bind-mounts the
// podfence binary read-only at MountPath, sets the args to "MountPath start -- <command>"
// and passes the container's entry in EnvPinning and its name in EnvContainer. podfence
// start (Starter.Start) then forks every process but the last and execs the last one.
//
// Pinning has no window: Start narrows the affinity of a locked OS thread, then forks (the
// child inherits the mask at clone) or execs (execve keeps the mask) from that thread, and
// restores the mask before unlocking. Go creates new threads from a template thread, never
// from a locked one, so the narrowed mask reaches nothing else.
//
// # Lifetime
//
// The last process keeps the starter's PID: PID 1 of the container when the pod does not
// share its PID namespace. The forked processes stay its children (execve reparents
// nothing), so it must reap them or they remain zombies once they exit. Nothing forwards
// signals, since the starter no longer exists: SIGTERM from the runtime reaches the last
// process only, and when PID 1 exits the kernel kills the rest of the PID namespace. In a
// shared PID namespace the forked processes are reparented to the pod's init when the last
// process exits, and live until the runtime tears the container down.
package pinning
