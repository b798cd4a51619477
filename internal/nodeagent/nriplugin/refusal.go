package nriplugin

import "github.com/containerd/nri/pkg/api"

// RefusalObserver is an extension that learns of every container the agent refuses at
// CreateContainer, with the error the runtime gets. Refused runs on the runtime's request:
// it must not block (queue the work and return).
type RefusalObserver interface {
	Refused(pod *api.PodSandbox, ctr *api.Container, err error)
}

// observeRefusal tells every RefusalObserver of a refusal; a panic is logged only.
func (a *Plugin) observeRefusal(pod *api.PodSandbox, ctr *api.Container, err error) {
	for _, ext := range a.exts {
		if o, ok := ext.(RefusalObserver); ok {
			if perr := guard(ext, "Refused", func() error { o.Refused(pod, ctr, err); return nil }); perr != nil {
				a.log.Error("extension failed", "event", "Refused", "extension", ext.Name(), "err", perr)
			}
		}
	}
}
