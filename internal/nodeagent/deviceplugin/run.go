package deviceplugin

import (
	"context"
	"path/filepath"
	"time"
)

// Run serves every resource and keeps it registered with the kubelet until ctx ends, then
// stops the servers and removes their sockets. It returns an error only when a server
// cannot start at first; a missing or failing kubelet is waited for, and later failures are
// logged and retried every PollInterval.
func (p *Plugin) Run(ctx context.Context) error {
	eps := map[string]*endpoint{}
	defer func() {
		for _, e := range eps {
			e.stop()
		}
		p.log.Info("device plugins stopped")
	}()
	if err := p.reconcile(eps); err != nil {
		return err
	}
	if len(eps) == 0 {
		p.log.Info("no exclusive or shared pool to advertise")
	}
	tick := time.NewTicker(p.opts.PollInterval)
	defer tick.Stop()
	var onlineErr string
	for {
		p.sync(ctx, eps)
		if p.opts.Online != nil {
			online, err := p.opts.Online()
			if err != nil && err.Error() != onlineErr {
				p.log.Warn("read online CPUs; device health unchanged", "err", err)
			} else if err == nil {
				p.SetOnline(online)
			}
			onlineErr = errText(err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.reloaded:
			_ = p.reconcile(eps) // a server that cannot start is retried and logged by sync
		case <-tick.C:
		}
	}
}

// reconcile makes eps serve the current resources: a new endpoint for a new resource, the
// new devices for a changed one, and no endpoint for a removed one. It returns the first
// error of a server that cannot start.
func (p *Plugin) reconcile(eps map[string]*endpoint) error {
	var firstErr error
	want := map[string]bool{}
	for _, r := range p.current() {
		want[r.name] = true
		e, ok := eps[r.name]
		if !ok {
			e = newEndpoint(r, p.opts.Dir, p.log)
			eps[r.name] = e
			if err := e.serve(); err != nil && firstErr == nil {
				firstErr = err
			}
			continue
		}
		if old := e.cur.Swap(r); old != r {
			e.log.Info("devices changed", "pool", r.pool.Name, "cpus", r.pool.CPUs.String(), "devices", r.capacity())
			old.wake()
		}
	}
	for name, e := range eps {
		if !want[name] {
			e.log.Info("pool removed: no longer advertised")
			e.stop()
			delete(eps, name)
		}
	}
	return firstErr
}

// sync serves again each endpoint whose socket is gone and registers each endpoint not yet
// registered with the kubelet socket now in the dir.
func (p *Plugin) sync(ctx context.Context, eps map[string]*endpoint) {
	kubeletSock := filepath.Join(p.opts.Dir, KubeletSocket)
	kubelet := statID(kubeletSock)
	for _, e := range eps {
		if !e.alive() {
			if e.srv != nil {
				e.log.Info("socket gone (kubelet restart?): serving again", "socket", e.path())
			}
			e.stop()
			err := e.serve()
			if err != nil && err.Error() != e.serveErr {
				e.log.Error("serve; retrying", "err", err)
			}
			if e.serveErr = errText(err); err != nil {
				continue
			}
		}
		if kubelet == (fileID{}) || e.kubelet == kubelet {
			continue
		}
		err := e.register(ctx, kubeletSock)
		switch {
		case err == nil:
			e.kubelet = kubelet
			e.log.Info("registered with the kubelet", "kubelet", kubeletSock, "endpoint", e.name)
		case ctx.Err() != nil:
			return
		case err.Error() != e.regErr:
			e.log.Warn("registration failed; retrying", "err", err)
		}
		e.regErr = errText(err)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
