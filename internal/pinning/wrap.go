package pinning

import (
	"errors"
	"fmt"
	"path/filepath"
)

// MountPath is where Wrap mounts the podfence binary inside the container.
const MountPath = "/.podfence/podfence"

// Mount is a bind mount, with the fields of NRI's api.Mount.
type Mount struct {
	Destination string
	Type        string
	Source      string
	Options     []string
}

// EnvVar is one environment variable.
type EnvVar struct {
	Name, Value string
}

// Wrapping is what the agent changes in a container so that podfence start runs first.
type Wrapping struct {
	Mount Mount
	Args  []string
	Env   []EnvVar
}

// Wrap returns the adjustment that makes podfence start a container's entrypoint, for the
// NRI agent's CreateContainer:
//
//   - binaryHostPath: the podfence binary on the host, absolute. It must be statically
//     linked (CGO_ENABLED=0) and executable by the container's user, as it runs inside
//     the container's image;
//   - container: the container's name, as in the annotation;
//   - args: the container's current process args (the OCI spec's process.args: entrypoint
//     then command). They run as the last process when that process names no binary;
//   - procs: the container's processes (Spec.For), checked first with Plan against the
//     CPUs the agent gives the container, so a bad fit refuses the container up front.
//
// The agent applies the result with NRI's adjustment methods:
//
//	adjust.AddMount(&api.Mount{Destination: w.Mount.Destination, Type: w.Mount.Type,
//		Source: w.Mount.Source, Options: w.Mount.Options})
//	adjust.SetArgs(w.Args)
//	for _, e := range w.Env {
//		adjust.AddEnv(e.Name, e.Value)
//	}
//
// along with EXCLUSIVE_CPUS and SHARED_CPUS, which podfence start reads too. The mount is
// a read-only bind of the binary at MountPath; the args are MountPath, "start", "--" and
// then args; the env is EnvPinning (the container's entry, as Encode writes it) and
// EnvContainer. Wrap is pure.
func Wrap(binaryHostPath, container string, args []string, procs []Process) (Wrapping, error) {
	switch {
	case !filepath.IsAbs(binaryHostPath):
		return Wrapping{}, fmt.Errorf("podfence binary %q: want an absolute host path", binaryHostPath)
	case container == "":
		return Wrapping{}, errors.New("wrap: container name is empty")
	case len(procs) == 0:
		return Wrapping{}, fmt.Errorf("wrap container %q: no process to start", container)
	case procs[len(procs)-1].Path == "" && (len(args) == 0 || args[0] == ""):
		return Wrapping{}, fmt.Errorf(`wrap container %q: the last process names no "process" and the container has no command to `+
			`run instead`, container)
	}
	return Wrapping{
		Mount: Mount{
			Destination: MountPath,
			Type:        "bind",
			Source:      binaryHostPath,
			Options:     []string{"rbind", "ro", "nosuid", "nodev"},
		},
		Args: append([]string{MountPath, "start", "--"}, args...),
		Env: []EnvVar{
			{Name: EnvPinning, Value: Encode(Container{Name: container, Processes: procs})},
			{Name: EnvContainer, Value: container},
		},
	}, nil
}
