package main

import (
	"errors"
	"fmt"
	"slices"

	"github.com/podfence/podfence/internal/admission"
	"github.com/podfence/podfence/internal/cpu/pools"
)

// The ConfigMaps whose files podfence itself reads, and how: the pool configs (agent and
// webhook, --pools) and the core-scheduling profiles (--coresched-profiles).
var contentReaders = map[string]func(source string, data []byte) error{
	"podfence-pools": func(source string, data []byte) error {
		_, err := pools.Parse(source, data)
		return err
	},
	"podfence-coresched-profiles": func(source string, data []byte) error {
		_, err := admission.ParseProfiles(source, data)
		return err
	},
}

// checkContent parses each file of podfence's ConfigMaps with podfence's own parser, so
// that values rendered as YAML read back as the agent and the webhook will read them.
func checkContent(o Object) error {
	read, ok := contentReaders[o.Key.Name]
	if o.Key.Group != "" || o.Key.Kind != "ConfigMap" || !ok {
		return nil
	}
	data, _ := o.Body["data"].(map[string]any)
	if len(data) == 0 {
		return errors.New("data: no files")
	}
	names := make([]string, 0, len(data))
	for name := range data {
		names = append(names, name)
	}
	slices.Sort(names)
	var errs []error
	for _, name := range names {
		s, ok := data[name].(string)
		if !ok {
			errs = append(errs, fmt.Errorf("data[%s]: not a string", name))
			continue
		}
		if err := read(name, []byte(s)); err != nil {
			errs = append(errs, fmt.Errorf("data[%s]: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
