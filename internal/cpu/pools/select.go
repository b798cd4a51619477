package pools

import (
	"errors"
	"fmt"
	"strings"
)

// Select returns the node's config among configs (in file name order, as Load returns them),
// by each config's SelectorMatch:
//   - AnyLabel (CPU-Pooler's rule, the default): the selector matches when one of its labels
//     is on the node with the same value; the first config that matches wins;
//   - AllLabels (Kubernetes' rule): every selector label must be on the node with the same
//     value, and two AllLabels configs must not both match.
//
// A config with an empty selector is the fallback: it applies when no config with a selector
// matches, and only one such config may exist then. (CPU-Pooler never selects a config without
// nodeSelector.)
func Select(configs []*Config, nodeLabels map[string]string) (*Config, error) {
	if len(configs) == 0 {
		return nil, errors.New("no pool configs to select from")
	}
	var found *Config
	var also, fallbacks []string
	var fallback *Config
	for _, c := range configs {
		switch {
		case len(c.NodeSelector) == 0:
			fallbacks, fallback = append(fallbacks, c.Source), c
		case !selects(c, nodeLabels):
		case found == nil:
			found = c
		case found.SelectorMatch == AllLabels && c.SelectorMatch == AllLabels:
			also = append(also, c.Source)
		}
	}
	switch {
	case found != nil && len(also) > 0:
		return nil, fmt.Errorf("more than one pool config with nodeSelectorMatch: all matches this node: %s, %s (give them "+
			"nodeSelectors that match different nodes)", found.Source, strings.Join(also, ", "))
	case found != nil:
		return found, nil
	case len(fallbacks) == 1:
		return fallback, nil
	case len(fallbacks) > 1:
		return nil, fmt.Errorf("no pool config's nodeSelector matches this node, and more than one has none: %s (give all but "+
			"one a nodeSelector)", strings.Join(fallbacks, ", "))
	}
	return nil, noMatch(configs, nodeLabels)
}

// selects reports whether c's nodeSelector (not empty) matches labels by c's rule.
func selects(c *Config, labels map[string]string) bool {
	all := c.SelectorMatch == AllLabels
	for k, v := range c.NodeSelector {
		got, ok := labels[k]
		if match := ok && got == v; match != all {
			return match // any: one match is enough; all: one mismatch is too many
		}
	}
	return all
}

// noMatch names the node's values of the labels the selectors use, and each selector.
func noMatch(configs []*Config, labels map[string]string) error {
	used := map[string]bool{}
	var wants []string
	for _, c := range configs {
		var sel []string
		for _, k := range sortedKeys(c.NodeSelector) {
			used[k] = true
			sel = append(sel, k+"="+c.NodeSelector[k])
		}
		rule := "one of"
		if c.SelectorMatch == AllLabels {
			rule = "all of"
		}
		wants = append(wants, c.Source+" wants "+rule+" "+strings.Join(sel, ", "))
	}
	var have []string
	for _, k := range sortedKeys(used) {
		if v, ok := labels[k]; ok {
			have = append(have, k+"="+v)
		} else {
			have = append(have, k+" unset")
		}
	}
	return fmt.Errorf("no pool config matches this node (node labels: %s): %s",
		strings.Join(have, ", "), strings.Join(wants, "; "))
}
