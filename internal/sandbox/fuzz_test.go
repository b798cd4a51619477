package sandbox_test

import (
	"math"
	"math/big"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/sandbox"
)

// FuzzSize checks the arithmetic against exact big-number sums: no overflow, the quota is
// the per-container rounded-up sum or no limit, and memory the exact sum or no limit.
func FuzzSize(f *testing.F) {
	f.Add(int64(50000), int64(100000), int64(25000), int64(50000), int64(25000), int64(100000), int64(64<<20), int64(1<<30), int64(160<<20))
	f.Add(int64(math.MaxInt64), int64(1), int64(1), int64(3), int64(-1), int64(0), int64(math.MaxInt64), int64(1), int64(0))
	f.Add(int64(1), int64(math.MaxInt64), int64(0), int64(100000), int64(1), int64(1), int64(-5), int64(0), int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, q1, p1, q2, p2, oq, op, m1, m2, om int64) {
		members := []sandbox.Member{
			{Resources: sandbox.Resources{Quota: q1, Period: p1, Memory: m1}, CPUs: cpuset.New(0)},
			{Resources: sandbox.Resources{Quota: q2, Period: p2, Memory: m2}, CPUs: cpuset.New(1)},
		}
		l := sandbox.Size(sandbox.Resources{Quota: oq, Period: op, Memory: om}, members, cpuset.New())

		wantQuota := new(big.Int)
		limited := true
		for _, r := range [][2]int64{{q1, p1}, {q2, p2}, {oq, op}} {
			term, ok := exactTerm(r[0], r[1])
			if !ok && r != [2]int64{oq, op} {
				limited = false
			}
			wantQuota.Add(wantQuota, term)
		}
		switch {
		case !limited || wantQuota.Sign() == 0 || wantQuota.Cmp(big.NewInt(sandbox.MaxQuota)) > 0:
			if l.Quota != 0 {
				t.Fatalf("quota %d, want none (exact sum %s, limited %v)", l.Quota, wantQuota, limited)
			}
		case wantQuota.Cmp(big.NewInt(sandbox.MinQuota)) < 0:
			if l.Quota != sandbox.MinQuota {
				t.Fatalf("quota %d, want the minimum (exact sum %s)", l.Quota, wantQuota)
			}
		case l.Quota != wantQuota.Int64():
			t.Fatalf("quota %d, want %s", l.Quota, wantQuota)
		}

		wantMem := new(big.Int)
		for _, m := range []int64{m1, m2, max(om, 0)} {
			wantMem.Add(wantMem, big.NewInt(m))
		}
		if m1 <= 0 || m2 <= 0 || !wantMem.IsInt64() || wantMem.Int64() == math.MaxInt64 {
			if l.Memory != 0 {
				t.Fatalf("memory %d, want none", l.Memory)
			}
		} else if l.Memory != wantMem.Int64() {
			t.Fatalf("memory %d, want %s", l.Memory, wantMem)
		}
		if l.CPUs.String() != "0-1" {
			t.Fatalf("cpus %s, want 0-1", l.CPUs)
		}
	})
}

// exactTerm is ceil(q*Period/p) as a big number; ok is false for no limit (q or p ≤ 0).
func exactTerm(q, p int64) (*big.Int, bool) {
	if q <= 0 || p <= 0 {
		return new(big.Int), false
	}
	n := new(big.Int).Mul(big.NewInt(q), big.NewInt(sandbox.Period))
	d := big.NewInt(p)
	quo, rem := new(big.Int).QuoRem(n, d, new(big.Int))
	if rem.Sign() != 0 {
		quo.Add(quo, big.NewInt(1))
	}
	return quo, true
}

// FuzzRuntimes: any pattern list parses or is refused naming the pattern; matching never
// panics, and a parsed list matches each of its plain names.
func FuzzRuntimes(f *testing.F) {
	f.Add("kata", "kata-qemu")
	f.Add("kata-[", "x")
	f.Add("\\", "")
	f.Fuzz(func(t *testing.T, pattern, handler string) {
		r, err := sandbox.ParseRuntimes([]string{pattern})
		if err != nil {
			return
		}
		r.Match(handler)
		if handler != "" && pattern == handler && !hasMeta(pattern) && !r.Match(handler) {
			t.Fatalf("%q does not match itself", pattern)
		}
	})
}

func hasMeta(s string) bool {
	for _, c := range s {
		if c == '*' || c == '?' || c == '[' || c == '\\' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' {
			return true
		}
	}
	return false
}
