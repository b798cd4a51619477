package admission

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/regfile"
)

// Config is what the webhook knows beyond the pod. The zero Config (and a nil one) checks
// no pool names and sets no core-scheduling group.
type Config struct {
	// Pools are the pool configs of the cluster's nodes, for all node selectors. When there
	// are any, a pool resource must name a pool that one of them declares.
	Pools []*pools.Config
	// Profiles map pods to core-scheduling groups; the first that matches wins.
	Profiles []Profile
}

// knownPools returns the exclusive and shared pools any config declares (the pools a
// resource can name), sorted; nil when there is no config.
func (c *Config) knownPools() []string {
	if c == nil {
		return nil
	}
	var names []string
	for _, pc := range c.Pools {
		for _, p := range pc.Pools {
			if p.Type != allocation.TypeDefault {
				names = append(names, p.Name)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// draPools returns the pools that every config declaring them has pods request through DRA
// (requestAPI: dra), sorted: no device plugin advertises them as extended resources. A pool
// some config offers through the device plugin is not one.
func (c *Config) draPools() []string {
	if c == nil {
		return nil
	}
	dra := map[string]bool{}
	for _, pc := range c.Pools {
		for _, p := range pc.Pools {
			if was, seen := dra[p.Name]; !seen || was {
				dra[p.Name] = p.ViaDRA()
			}
		}
	}
	var names []string
	for name, ok := range dra {
		if ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// Profile gives the pods it selects a core-scheduling group, like a Koordinator colocation
// profile. A pod matches when its namespace is one of Namespaces (any namespace when empty)
// and PodSelector selects its labels (any pod when nil). Group or Policy must be set: they
// become the labels coresched.LabelGroup and coresched.LabelPolicy. A profile's Group is
// shared by its Namespaces (every namespace when empty): the only way a group spans
// namespaces (SharedGroups, docs/tenancy.md).
type Profile struct {
	Name        string                `json:"name,omitempty"` // names the profile in warnings
	Namespaces  []string              `json:"namespaces,omitempty"`
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
	Group       string                `json:"group,omitempty"`
	Policy      string                `json:"policy,omitempty"` // "", exclusive or none

	// NamespaceSelector is refused with an explanation: the webhook sees only the pod.
	NamespaceSelector json.RawMessage `json:"namespaceSelector,omitempty"`

	selector labels.Selector // PodSelector compiled; nil matches everything
}

// labels returns the labels the profile sets.
func (p Profile) labels() map[string]string {
	l := map[string]string{}
	if p.Group != "" {
		l[coresched.LabelGroup] = p.Group
	}
	if p.Policy != "" {
		l[coresched.LabelPolicy] = p.Policy
	}
	return l
}

// matches reports whether the profile selects a pod of namespace ns with labels l.
func (p Profile) matches(ns string, l map[string]string) bool {
	if len(p.Namespaces) > 0 && !slices.Contains(p.Namespaces, ns) {
		return false
	}
	return p.selector == nil || p.selector.Matches(labels.Set(l))
}

// ParseProfiles reads a core-scheduling profile file: a YAML list of profiles, e.g.
//
//   - name: telco-dataplane
//     namespaces: [telco]
//     podSelector: {matchLabels: {tier: dataplane}}
//     group: dataplane
//   - namespaces: [batch]
//     policy: exclusive
//
// source names the input in errors. Unknown fields are errors, and so is every profile whose
// selector, group or policy is invalid; all problems are returned, joined.
func ParseProfiles(source string, data []byte) ([]Profile, error) {
	var ps []Profile
	if err := yaml.UnmarshalStrict(data, &ps); err != nil {
		return nil, fmt.Errorf("core-scheduling profiles %s: want a YAML list of {name, namespaces, podSelector, group, policy}: %w", source, err)
	}
	var errs []error
	for i := range ps {
		if err := ps[i].compile(); err != nil {
			errs = append(errs, fmt.Errorf("core-scheduling profiles %s: profile %d%s: %w", source, i, nameSuffix(ps[i].Name), err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return ps, nil
}

func nameSuffix(name string) string {
	if name == "" {
		return ""
	}
	return fmt.Sprintf(" (%s)", name)
}

// compile checks the profile and compiles its pod selector.
func (p *Profile) compile() error {
	if len(p.NamespaceSelector) > 0 {
		return errors.New("namespaceSelector is not supported: the webhook sees the pod, not its namespace's labels; list the " +
			"namespaces by name in namespaces")
	}
	for _, ns := range p.Namespaces {
		if strings.TrimSpace(ns) == "" {
			return errors.New("namespaces: an empty name")
		}
	}
	if p.Group == "" && p.Policy == "" {
		return errors.New("sets neither group nor policy (want a group name, or policy exclusive or none)")
	}
	if _, err := coresched.RequestOf(p.labels()); err != nil {
		return err
	}
	if p.PodSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(p.PodSelector)
		if err != nil {
			return fmt.Errorf("podSelector: %w", err)
		}
		p.selector = sel
	}
	return nil
}

// LoadProfiles reads a profile file (see ParseProfiles).
func LoadProfiles(path string) ([]Profile, error) {
	data, err := regfile.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load core-scheduling profiles: %w", err)
	}
	return ParseProfiles(path, data)
}

// Load builds a Config from a pool config file or directory and a profile file; an empty
// path leaves that part out.
func Load(poolsPath, profilesPath string) (*Config, error) {
	cfg := &Config{}
	var err error
	if poolsPath != "" {
		if cfg.Pools, err = pools.Load(poolsPath); err != nil {
			return nil, err
		}
	}
	if profilesPath != "" {
		if cfg.Profiles, err = LoadProfiles(profilesPath); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}
