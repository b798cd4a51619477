// Command helmcheck is hack/helm.sh's checker of the Helm chart deploy/helm/podfence
// against the kustomize base deploy/:
//
//	helmcheck kustomize DIR                  build the kustomization DIR (kustomize's library, as kubectl) to stdout
//	helmcheck compare [flags] WANT GOT       WANT (kustomize) and GOT (helm template) equal, object by object
//	helmcheck validate [-namespace NS] FILE  every object decodes strictly as its API type, in NS
//
// compare normalises both sides first: Helm's own labels and annotations, kustomize's hash
// suffixes of generated names, the namespace kustomize puts on cluster-scoped objects, and
// the text of YAML files in ConfigMaps (parsed: comments and layout do not count). Every
// other difference is printed as the object and the field, and it exits 1.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "helmcheck:", err)
		os.Exit(1)
	}
}

// errDiffer: the report has been printed.
var errDiffer = errors.New("the renderings differ")

func run(args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("want a command: kustomize, compare or validate")
	}
	switch cmd, args := args[0], args[1:]; cmd {
	case "kustomize":
		if len(args) != 1 {
			return errors.New("kustomize: want one directory")
		}
		m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), args[0])
		if err != nil {
			return fmt.Errorf("kustomize build %s: %w", args[0], err)
		}
		b, err := m.AsYaml()
		if err != nil {
			return fmt.Errorf("kustomize build %s: %w", args[0], err)
		}
		_, err = out.Write(b)
		return err
	case "compare":
		return compare(args, out)
	case "validate":
		return validate(args, out)
	default:
		return fmt.Errorf("command %q: want kustomize, compare or validate", cmd)
	}
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ", ") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func compare(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	var opts Options
	fs.Var((*listFlag)(&opts.KustomizeOnly), "kustomize-only", `an object ("Kind name") only the kustomize base has (repeatable)`)
	fs.Var((*listFlag)(&opts.ChartOnly), "chart-only", `an object ("Kind name") only the chart has (repeatable)`)
	fs.StringVar(&opts.GeneratedTLS, "generated-tls", "", "the webhook's TLS Secret, when each side made its own certificate")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return errors.New("compare: want two files, the kustomize rendering and the chart's")
	}
	want, err := readObjects(fs.Arg(0))
	if err != nil {
		return err
	}
	got, err := readObjects(fs.Arg(1))
	if err != nil {
		return err
	}
	r := Compare(want, got, opts)
	r.Print(out)
	if !r.OK() {
		return fmt.Errorf("%s and %s: %w", fs.Arg(0), fs.Arg(1), errDiffer)
	}
	fmt.Fprintf(out, "%d objects equal (%s and %s)\n", r.Matched, fs.Arg(0), fs.Arg(1))
	return nil
}

func validate(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	ns := fs.String("namespace", "podfence-system", "the namespace every namespaced object must name")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("validate: want one file")
	}
	objs, err := readObjects(fs.Arg(0))
	if err != nil {
		return err
	}
	var bad, unchecked int
	for _, v := range Validate(objs, *ns) {
		switch {
		case v.Err != nil:
			bad++
			fmt.Fprintf(out, "%s: %v\n", v.Key, v.Err)
		case !v.Checked:
			unchecked++
		}
	}
	if bad > 0 {
		return fmt.Errorf("%s: %d of %d objects invalid", fs.Arg(0), bad, len(objs))
	}
	fmt.Fprintf(out, "%d objects valid (%d as their API types, %d custom kinds by key only)\n", len(objs), len(objs)-unchecked, unchecked)
	return nil
}

func readObjects(path string) ([]Object, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := ParseObjects(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}
