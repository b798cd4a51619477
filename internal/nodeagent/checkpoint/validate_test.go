package checkpoint

import (
	"slices"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

func TestValidate(t *testing.T) {
	pools := map[string]cpuset.CPUSet{
		"default":     mustParse(t, "0-1"),
		"exclusive_a": mustParse(t, "2-7,10-15"),
		"shared_b":    mustParse(t, "8-9"),
	}
	online := mustParse(t, "0-15")
	fileA, fileB := JournalFile, JournalFile
	for _, tc := range []struct {
		name   string
		allocs []allocation.Allocation
		online string // "" for online above
		pools  map[string]cpuset.CPUSet
		want   []Conflict
	}{
		{name: "none"},
		{name: "all fit", allocs: []allocation.Allocation{
			exclusive(t, uid1, "a", "exclusive_a", "2-3", "10-11"),
			exclusive(t, uid2, "b", "exclusive_a", "4", ""),
			shared(uid1, "s", "shared_b", 500),
			shared(uid2, "s", "shared_b", 500),
			{PodUID: uid2, Container: "pause", Pool: "default", Type: allocation.TypeDefault},
		}},
		{name: "two exclusive pools fit", allocs: []allocation.Allocation{func() allocation.Allocation {
			a := exclusive(t, uid1, "a", "exclusive_a", "2,8", "")
			a.ExtraPools = []string{"shared_b"} // a pool's CPUs count as the record's (the pool's type is the planner's to check)
			return a
		}()}},
		{name: "shared pool missing", allocs: []allocation.Allocation{shared(uid1, "a", "shared_x", 100)},
			want: []Conflict{{Key: allocation.Key{PodUID: uid1, Container: "a"}, File: fileA,
				Reason: `pool "shared_x" is not in the pool config: restore the pool config, or drain the node and delete ` + fileA}}},
		{name: "exclusive pool missing", allocs: []allocation.Allocation{exclusive(t, uid1, "a", "exclusive_x", "2", "10")},
			want: []Conflict{{Key: allocation.Key{PodUID: uid1, Container: "a"}, File: fileA,
				Reason: `pool "exclusive_x" (CPUs 2,10) is not in the pool config: restore the pool config, or drain the node and delete ` + fileA}}},
		{name: "CPU offline", online: "0-4,6-15", allocs: []allocation.Allocation{exclusive(t, uid1, "a", "exclusive_a", "4-5", "")},
			want: []Conflict{{Key: allocation.Key{PodUID: uid1, Container: "a"}, File: fileA,
				Reason: `CPU 5 of pool "exclusive_a" is not online: bring it back online, or drain the node and delete ` + fileA}}},
		{name: "idled CPUs gone", online: "0-11", allocs: []allocation.Allocation{exclusive(t, uid1, "a", "exclusive_a", "4-5", "12-13")},
			want: []Conflict{{Key: allocation.Key{PodUID: uid1, Container: "a"}, File: fileA,
				Reason: `CPUs 12-13 of pool "exclusive_a" are not online: bring them back online, or drain the node and delete ` + fileA}}},
		{name: "CPU moved to another pool", allocs: []allocation.Allocation{exclusive(t, uid1, "a", "exclusive_a", "7", "")},
			pools: map[string]cpuset.CPUSet{"exclusive_a": mustParse(t, "2-6"), "shared_b": mustParse(t, "7-9")},
			want: []Conflict{{Key: allocation.Key{PodUID: uid1, Container: "a"}, File: fileA,
				Reason: `CPU 7 of pool "exclusive_a" is now in pool "shared_b": restore the pool config, or drain the node and delete ` + fileA}}},
		{name: "CPUs moved to two pools and none", allocs: []allocation.Allocation{exclusive(t, uid1, "a", "exclusive_a", "1-2,7-9", "15")},
			pools: map[string]cpuset.CPUSet{"default": mustParse(t, "0-1"), "exclusive_a": mustParse(t, "2-6"), "shared_b": mustParse(t, "7-9")},
			want: []Conflict{
				{Key: allocation.Key{PodUID: uid1, Container: "a"}, File: fileA,
					Reason: `CPU 15 of pool "exclusive_a" is now in no pool: restore the pool config, or drain the node and delete ` + fileA},
				{Key: allocation.Key{PodUID: uid1, Container: "a"}, File: fileA,
					Reason: `CPU 1 of pool "exclusive_a" is now in pool "default": restore the pool config, or drain the node and delete ` + fileA},
				{Key: allocation.Key{PodUID: uid1, Container: "a"}, File: fileA,
					Reason: `CPUs 7-9 of pool "exclusive_a" are now in pool "shared_b": restore the pool config, or drain the node and delete ` + fileA},
			}},
		{name: "CPU held twice", allocs: []allocation.Allocation{
			exclusive(t, uid2, "b", "exclusive_a", "3-4", "11-12"),
			exclusive(t, uid1, "a", "exclusive_a", "2-3", "10-11"),
		}, want: []Conflict{{Key: allocation.Key{PodUID: uid2, Container: "b"}, File: fileB,
			Reason: `CPUs 3,11 of pool "exclusive_a" are also held by container "a" of pod ` +
				`"` + uid1 + `" (pool "exclusive_a"): at most one of them runs there ` +
				`(a restarted agent believes the runtime); to clear both records, drain the node and delete ` + JournalFile}}},
		{name: "CPU held three times", allocs: []allocation.Allocation{
			exclusive(t, uid1, "a", "exclusive_a", "2", ""),
			exclusive(t, uid2, "b", "exclusive_a", "2", ""),
			exclusive(t, uid2, "c", "exclusive_a", "2", ""),
		}, want: []Conflict{
			{Key: allocation.Key{PodUID: uid2, Container: "b"}, File: fileB,
				Reason: `CPU 2 of pool "exclusive_a" is also held by container "a" of pod ` +
					`"` + uid1 + `" (pool "exclusive_a"): at most one of them runs there ` +
					`(a restarted agent believes the runtime); to clear both records, drain the node and delete ` + JournalFile},
			{Key: allocation.Key{PodUID: uid2, Container: "c"}, File: JournalFile,
				Reason: `CPU 2 of pool "exclusive_a" is also held by container "a" of pod ` +
					`"` + uid1 + `" (pool "exclusive_a"): at most one of them runs there ` +
					`(a restarted agent believes the runtime); to clear both records, drain the node and delete ` + JournalFile},
		}},
		{name: "pool missing and CPU offline", online: "0-3", allocs: []allocation.Allocation{exclusive(t, uid1, "a", "exclusive_x", "3-4", "")},
			want: []Conflict{
				{Key: allocation.Key{PodUID: uid1, Container: "a"}, File: fileA,
					Reason: `pool "exclusive_x" (CPUs 3-4) is not in the pool config: restore the pool config, or drain the node and delete ` + fileA},
				{Key: allocation.Key{PodUID: uid1, Container: "a"}, File: fileA,
					Reason: `CPU 4 of pool "exclusive_x" is not online: bring it back online, or drain the node and delete ` + fileA},
			}},
		{name: "shared share beside exclusive CPUs fits", allocs: []allocation.Allocation{
			{PodUID: uid1, Container: "a", Pool: "exclusive_a", Type: allocation.TypeExclusive, CPUs: mustParse(t, "2"),
				SharedPool: "shared_b", MilliCPU: 100},
		}},
		{name: "shared pool of a share beside exclusive CPUs missing", allocs: []allocation.Allocation{
			{PodUID: uid1, Container: "a", Pool: "exclusive_a", Type: allocation.TypeExclusive, CPUs: mustParse(t, "2"),
				SharedPool: "shared_x", MilliCPU: 100},
		}, want: []Conflict{{Key: allocation.Key{PodUID: uid1, Container: "a"}, File: fileA,
			Reason: `shared pool "shared_x" (100 millicpu) is not in the pool config: restore the pool config, or drain the node and ` +
				`delete ` + fileA}}},
		{name: "unsafe key", allocs: []allocation.Allocation{shared("../x", "a/b", "gone", 1)},
			want: []Conflict{{Key: allocation.Key{PodUID: "../x", Container: "a/b"}, File: JournalFile,
				Reason: `pool "gone" is not in the pool config: restore the pool config, or drain the node and delete ` + JournalFile}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			on, p := online, pools
			if tc.online != "" {
				on = mustParse(t, tc.online)
			}
			if tc.pools != nil {
				p = tc.pools
			}
			in := slices.Clone(tc.allocs)
			got := Validate(tc.allocs, on, p)
			if !slices.Equal(got, tc.want) {
				t.Errorf("Validate() =\n%q\nwant\n%q", got, tc.want)
			}
			if !sameAllocs(tc.allocs, in) {
				t.Errorf("Validate changed its input: %+v, was %+v", tc.allocs, in)
			}
		})
	}
}
