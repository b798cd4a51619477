package extender

import (
	"math/rand/v2"
	"testing"

	"github.com/podfence/podfence/internal/coresched"
)

func group(t *testing.T, labels map[string]string) Pod {
	t.Helper()
	g, err := coresched.GroupFor(coresched.ByNamespace, coresched.SharedGroups{},
		coresched.Pod{UID: "u1", Namespace: "shop", Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	return Pod{Group: g, Exclusive: labels[coresched.LabelPolicy] == coresched.PolicyExclusive}
}

func TestScore(t *testing.T) {
	shared := group(t, nil)
	web := group(t, map[string]string{coresched.LabelGroup: "web"})
	none := group(t, map[string]string{coresched.LabelPolicy: coresched.PolicyNone})
	excl := group(t, map[string]string{coresched.LabelPolicy: coresched.PolicyExclusive})
	excl.MilliCPU = 4000
	node := Facts{Known: true, CoreSched: true, Cores: 16, ThreadsPerCore: 2}
	with := func(f func(*Facts)) Facts { n := node; f(&n); return n }
	for _, tc := range []struct {
		name string
		pod  Pod
		node Facts
		want int64
	}{
		{name: "policy none", pod: none, node: node, want: Neutral},
		{name: "unknown node", pod: web, node: Facts{}, want: Neutral},
		{name: "no core scheduling", pod: web, node: with(func(n *Facts) { n.CoreSched = false }), want: Neutral},
		{name: "no core count", pod: web, node: with(func(n *Facts) { n.Cores = 0 }), want: Neutral},
		// README's worked example: 16 cores.
		{name: "runs the group, 4 groups", pod: web, node: with(func(n *Facts) { n.Groups, n.HasGroup = 4, true }), want: 9},
		{name: "empty node", pod: web, node: node, want: 6},
		{name: "2 other groups", pod: web, node: with(func(n *Facts) { n.Groups = 2 }), want: 5},
		{name: "16 other groups", pod: web, node: with(func(n *Facts) { n.Groups = 16 }), want: 0},
		{name: "implicit group shares too", pod: shared, node: with(func(n *Facts) { n.Groups, n.HasGroup = 16, true }), want: 4},
		{name: "exclusive, idle node", pod: excl, node: node, want: 10},
		{name: "exclusive, 12 of 16 busy", pod: excl, node: with(func(n *Facts) { n.BusyCores = 12 }), want: 3},
		{name: "exclusive, 2 cores short", pod: excl, node: with(func(n *Facts) { n.BusyCores = 15 }), want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Score(tc.pod, tc.node); got != tc.want {
				t.Errorf("Score(%+v, %+v) = %d, want %d", tc.pod, tc.node, got, tc.want)
			}
		})
	}
}

func TestNeedCores(t *testing.T) {
	for _, tc := range []struct {
		milli int64
		tpc   int
		want  int
	}{{0, 2, 1}, {1000, 2, 1}, {2000, 2, 1}, {2001, 2, 2}, {3000, 1, 3}, {500, 0, 1}} {
		if got := NeedCores(tc.milli, tc.tpc); got != tc.want {
			t.Errorf("NeedCores(%d, %d) = %d, want %d", tc.milli, tc.tpc, got, tc.want)
		}
	}
}

// TestScoreProperties checks bounds and monotony over random nodes: more groups or busy
// cores never raise a score, more cores or the pod's group already there never lower it.
func TestScoreProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	pods := []Pod{group(t, nil), group(t, map[string]string{coresched.LabelGroup: "web"}),
		group(t, map[string]string{coresched.LabelPolicy: coresched.PolicyExclusive})}
	for i := range 20000 {
		p := pods[i%len(pods)]
		p.MilliCPU = r.Int64N(16000)
		n := Facts{Known: r.IntN(8) > 0, CoreSched: r.IntN(8) > 0, Cores: r.IntN(130), ThreadsPerCore: 1 + r.IntN(2),
			Groups: r.IntN(200), HasGroup: r.IntN(2) == 0, BusyCores: r.IntN(140)}
		s := Score(p, n)
		if s < 0 || s > MaxScore {
			t.Fatalf("Score(%+v, %+v) = %d: out of 0..%d", p, n, s, MaxScore)
		}
		for _, c := range []struct {
			what   string
			f      func(*Facts)
			higher bool // the changed node scores at least as high
		}{
			{"one more group", func(m *Facts) { m.Groups++ }, false},
			{"one more busy core", func(m *Facts) { m.BusyCores++ }, false},
			{"one more core", func(m *Facts) { m.Cores++ }, true},
			{"runs the pod's group", func(m *Facts) { m.HasGroup = true }, true},
		} {
			m := n
			c.f(&m)
			if m.Cores == 1 && n.Cores == 0 || m.Known != n.Known {
				continue // from neutral to scored: either way
			}
			if got := Score(p, m); c.higher && got < s || !c.higher && got > s {
				t.Fatalf("%s: Score(%+v, %+v) = %d, was %d", c.what, p, m, got, s)
			}
		}
	}
}

// TestScoreOrders ranks a set of random nodes and checks the order the README promises for
// a pod that shares its group: a node running the group beats one that does not at equal
// density, and among nodes that do not, fewer groups per core wins.
func TestScoreOrders(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	web := group(t, map[string]string{coresched.LabelGroup: "web"})
	for range 5000 {
		a := Facts{Known: true, CoreSched: true, Cores: 1 + r.IntN(128), Groups: r.IntN(100)}
		b := a
		b.HasGroup = true
		if Score(web, b) <= Score(web, a) && Score(web, a) < MaxScore {
			t.Fatalf("running the group does not win: %+v → %d, %+v → %d", b, Score(web, b), a, Score(web, a))
		}
		c := Facts{Known: true, CoreSched: true, Cores: 1 + r.IntN(128), Groups: r.IntN(100)}
		if float64(a.Groups+1)/float64(a.Cores) < float64(c.Groups+1)/float64(c.Cores) && Score(web, a) < Score(web, c) {
			t.Fatalf("denser node wins: %+v → %d, %+v → %d", a, Score(web, a), c, Score(web, c))
		}
	}
}
