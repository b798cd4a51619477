package nriplugin

import (
	"sync"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/podapi"
)

// maxParsedPoolRequests bounds the memo of parsed podfence.io/cpu-pools values.
const maxParsedPoolRequests = 1024

// poolRequests memoizes podapi.ParseCPUPoolsFor by value: a pod's containers carry the same
// value, and a Synchronize reads it for every running container (the JSON decoding was a third
// of a Synchronize's CPU). The maps returned are shared: read them only.
type poolRequests struct {
	mu      sync.Mutex
	byValue map[string]map[string]plan.Request
}

// parse is podapi.ParseCPUPoolsFor(v, first); a value that does not parse is not kept, so its
// error names first as it would.
func (p *poolRequests) parse(v, first string) (map[string]plan.Request, error) {
	p.mu.Lock()
	byCtr, ok := p.byValue[v]
	p.mu.Unlock()
	if ok {
		return byCtr, nil
	}
	byCtr, err := podapi.ParseCPUPoolsFor(v, first)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.byValue == nil || len(p.byValue) >= maxParsedPoolRequests {
		p.byValue = map[string]map[string]plan.Request{}
	}
	p.byValue[v] = byCtr
	p.mu.Unlock()
	return byCtr, nil
}
