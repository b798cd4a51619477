package nriplugin

// Ready reports whether the runtime has synchronised the agent at least once: from then on
// it knows every running container and answers for new ones.
func (a *Plugin) Ready() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.syncs > 0
}
