package allocation

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"
)

func TestAllocationJSON(t *testing.T) {
	a := Allocation{PodUID: "u", Namespace: "n", Pod: "p", Container: "c", Pool: "exclusive_a", Type: TypeExclusive,
		CPUs: cpuset.New(2, 3, 50), Idled: cpuset.New(51), SharedPool: "shared_s", MilliCPU: 200}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"podUID":"u","namespace":"n","pod":"p","container":"c","pool":"exclusive_a","type":"exclusive","cpus":"2-3,50","idled":"51","sharedPool":"shared_s","milliCPU":200}`
	if string(b) != want {
		t.Fatalf("json = %s\nwant   %s", b, want)
	}
	var back Allocation
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !back.CPUs.Equals(a.CPUs) || !back.Idled.Equals(a.Idled) || back.Key() != a.Key() || back.MilliCPU != 200 || back.SharedPool != "shared_s" {
		t.Errorf("round trip = %+v, want %+v", back, a)
	}
	if got := back.Held().String(); got != "2-3,50-51" {
		t.Errorf("Held = %s, want 2-3,50-51", got)
	}
	if got := back.ExclusivePools(); len(got) != 1 || got[0] != "exclusive_a" {
		t.Errorf("ExclusivePools = %v, want [exclusive_a]", got)
	}
	two := a
	two.ExtraPools = []string{"exclusive_b"}
	b, err = json.Marshal(two)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(b), `,"extraPools":["exclusive_b"]}`) {
		t.Errorf("json = %s, want extraPools at the end", b)
	}
	var back2 Allocation
	if err := json.Unmarshal(b, &back2); err != nil {
		t.Fatal(err)
	}
	if got := back2.ExclusivePools(); strings.Join(got, ",") != "exclusive_a,exclusive_b" {
		t.Errorf("ExclusivePools after a round trip = %v, want [exclusive_a exclusive_b]", got)
	}
	if got := (Allocation{Type: TypeShared, Pool: "shared_s", ExtraPools: []string{"x"}}).ExclusivePools(); got != nil {
		t.Errorf("ExclusivePools of a shared allocation = %v, want none", got)
	}
	for _, bad := range []string{`{"cpus":"0-99999"}`, `{"idled":"x"}`} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil || !strings.Contains(err.Error(), "field") {
			t.Errorf("Unmarshal(%s) err = %v, want an error naming the field", bad, err)
		}
	}
}

// TestTypeRank: the order the plan and the node report list pools in.
func TestTypeRank(t *testing.T) {
	got := []int{TypeRank(TypeExclusive), TypeRank(TypeShared), TypeRank(TypeDefault), TypeRank("other")}
	if got[0] != 0 || got[1] != 1 || got[2] != 2 || got[3] != 2 {
		t.Errorf("ranks of exclusive, shared, default, other = %v, want [0 1 2 2]", got)
	}
}
