package main

import (
	"fmt"
	"io"
	"strings"
)

// report prints one line per check and counts them:
//
//	PASS <check>: <name>=<value> ...
//	FAIL <check>: <name>=<value> (want <value>); ...
type report struct {
	out            io.Writer
	passed, failed int
}

// fact is one value read from the guest, and the value it should have.
type fact struct{ name, got, want string }

func (r *report) pass(check, read string) {
	r.passed++
	fmt.Fprintf(r.out, "PASS %s: %s\n", check, read)
}

func (r *report) fail(check, why string) {
	r.failed++
	fmt.Fprintf(r.out, "FAIL %s: %s\n", check, why)
}

// expect prints PASS with every fact read when each has its wanted value, else FAIL with
// those that differ.
func (r *report) expect(check string, facts ...fact) {
	var read, bad []string
	for _, f := range facts {
		read = append(read, f.name+"="+f.got)
		if f.got != f.want {
			bad = append(bad, fmt.Sprintf("%s=%s (want %s)", f.name, f.got, f.want))
		}
	}
	if len(bad) > 0 {
		r.fail(check, strings.Join(bad, "; "))
		return
	}
	r.pass(check, strings.Join(read, " "))
}
