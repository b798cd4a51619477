package grant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/topology"
)

// Version is the grant file format this package writes and reads.
const Version = 1

// MaxFileSize bounds a grant file.
const MaxFileSize = 64 << 10

type grantJSON struct {
	Version   int               `json:"version"`
	ClaimUID  string            `json:"claimUID"`
	Namespace string            `json:"namespace,omitempty"`
	Name      string            `json:"name,omitempty"`
	PodUIDs   []string          `json:"podUIDs"`
	Exclusive map[string]string `json:"exclusive,omitempty"`
	Shared    map[string]int64  `json:"shared,omitempty"`
	EPCBytes  int64             `json:"epcBytes,omitempty"`
}

// Marshal is the grant's JSON form (CPU lists as text), after Check.
func Marshal(g Grant) ([]byte, error) {
	if err := g.Check(); err != nil {
		return nil, err
	}
	j := grantJSON{Version: Version, ClaimUID: g.ClaimUID, Namespace: g.Namespace, Name: g.Name,
		PodUIDs: g.PodUIDs, Shared: g.Shared, EPCBytes: g.EPCBytes}
	if len(g.Exclusive) > 0 {
		j.Exclusive = make(map[string]string, len(g.Exclusive))
		for p, s := range g.Exclusive {
			j.Exclusive[p] = s.String()
		}
	}
	return json.Marshal(j)
}

// Parse reads a grant's JSON form strictly: known fields only, version 1, at most MaxFileSize
// bytes, then Check.
func Parse(data []byte) (Grant, error) {
	if len(data) > MaxFileSize {
		return Grant{}, fmt.Errorf("grant: %d bytes (at most %d)", len(data), MaxFileSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var j grantJSON
	if err := dec.Decode(&j); err != nil {
		return Grant{}, fmt.Errorf("grant: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Grant{}, fmt.Errorf("grant: data after the JSON object")
	}
	if j.Version != Version {
		return Grant{}, fmt.Errorf("grant: version %d (this agent reads version %d)", j.Version, Version)
	}
	g := Grant{ClaimUID: j.ClaimUID, Namespace: j.Namespace, Name: j.Name, PodUIDs: j.PodUIDs,
		Shared: j.Shared, EPCBytes: j.EPCBytes}
	if len(g.Shared) == 0 {
		g.Shared = nil
	}
	if len(j.Exclusive) > 0 {
		g.Exclusive = make(map[string]cpuset.CPUSet, len(j.Exclusive))
		for p, s := range j.Exclusive {
			cpus, err := topology.ParseCPUList(s)
			if err != nil {
				return Grant{}, fmt.Errorf("grant %s: exclusive pool %q: %w", j.ClaimUID, p, err)
			}
			g.Exclusive[p] = cpus
		}
	}
	if err := g.Check(); err != nil {
		return Grant{}, fmt.Errorf("grant: %w", err)
	}
	return g, nil
}
