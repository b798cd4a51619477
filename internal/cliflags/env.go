// Package cliflags holds what podfence's commands share about flags.
package cliflags

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// FromEnv sets each flag not given on the command line from PODFENCE_<NAME> (upper
// case, '-' → '_'); a repeatable flag takes a comma-separated list.
func FromEnv(fs *pflag.FlagSet, lookup func(string) (string, bool)) error {
	var err error
	fs.VisitAll(func(fl *pflag.Flag) {
		name := "PODFENCE_" + strings.ToUpper(strings.ReplaceAll(fl.Name, "-", "_"))
		v, ok := lookup(name)
		if err != nil || fl.Changed || !ok {
			return
		}
		values := []string{v}
		if fl.Value.Type() == "stringArray" {
			values = strings.Split(v, ",")
		}
		for _, one := range values {
			if serr := fs.Set(fl.Name, strings.TrimSpace(one)); serr != nil {
				err = fmt.Errorf("environment %s=%q: %w", name, v, serr)
				return
			}
		}
	})
	return err
}
