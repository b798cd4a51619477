package status

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestWriteIsolation(t *testing.T) {
	iso := Isolation{NoIRQCPUs: "2-3", UnmovableIRQs: []int{25}, Partitions: true, IsolatedCPUs: "2-3",
		Containers: []IsolationContainer{
			{Namespace: "ns", Pod: "rt", Container: "app", CPUs: "2-3", NoIRQs: true, NoLoadBalance: true, Partition: "isolated"},
			{Namespace: "ns", Pod: "dp", Container: "app", CPUs: "4", NoIRQs: true, Degraded: []string{"interrupts 25: the kernel does not let them move off CPUs 4"}},
		}}
	b, err := json.Marshal(iso)
	if err != nil {
		t.Fatal(err)
	}
	r := Report{Extensions: map[string]json.RawMessage{SectionIsolation: b}}
	var w bytes.Buffer
	if err := writeIsolation(&w, &r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Isolation beyond the cpuset",
		"interrupts           off CPUs 2-3; 1 the kernel will not move: [25]",
		"isolated partitions  yes",
		"unbound workqueues   off CPUs 2-3",
		"ns/rt app            CPUs 2-3  no interrupts, isolated partition (isolated)  ok",
		"ns/dp app            CPUs 4    no interrupts                                 degraded: interrupts 25: the kernel does not let them move off CPUs 4",
	} {
		if !strings.Contains(w.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, w.String())
		}
	}
	var none bytes.Buffer
	if err := writeIsolation(&none, &Report{}); err != nil || none.Len() != 0 {
		t.Errorf("no section: %q, %v; want nothing", none.String(), err)
	}
}
