package enforce

import (
	"maps"
	"slices"
	"testing"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/coresched/kernel"
)

func TestConverge(t *testing.T) {
	type C = map[kernel.Cookie]int
	for _, tc := range []struct {
		name string
		obs  []observation
		want map[string]kernel.Cookie
	}{
		{name: "one cookie", want: map[string]kernel.Cookie{"g": 7}, obs: []observation{
			{ID: "a", Group: "g", Start: 1, Cookies: C{7: 3}},
			{ID: "b", Group: "g", Start: 2, Cookies: C{7: 1, 0: 1}},
		}},
		{name: "majority wins", want: map[string]kernel.Cookie{"g": 8}, obs: []observation{
			{ID: "a", Group: "g", Start: 1, Cookies: C{7: 5}},
			{ID: "b", Group: "g", Start: 2, Cookies: C{8: 1}},
			{ID: "c", Group: "g", Start: 3, Cookies: C{8: 1}},
		}},
		{name: "tie: the oldest member's", want: map[string]kernel.Cookie{"g": 9}, obs: []observation{
			{ID: "a", Group: "g", Start: 5, Cookies: C{7: 1}},
			{ID: "b", Group: "g", Start: 2, Cookies: C{9: 1}},
		}},
		{name: "a member votes with most of its tasks", want: map[string]kernel.Cookie{"g": 7}, obs: []observation{
			{ID: "a", Group: "g", Start: 1, Cookies: C{7: 2, 8: 1, 0: 9}},
		}},
		{name: "no cookie anywhere", want: map[string]kernel.Cookie{}, obs: []observation{
			{ID: "a", Group: "g", Start: 1, Cookies: C{0: 2}},
		}},
		{name: "a cookie in two groups goes to the larger", want: map[string]kernel.Cookie{"g": 7, "h": 8}, obs: []observation{
			{ID: "a", Group: "g", Start: 3, Cookies: C{7: 1}},
			{ID: "b", Group: "g", Start: 4, Cookies: C{7: 1}},
			{ID: "c", Group: "h", Start: 1, Cookies: C{7: 1}},
			{ID: "d", Group: "h", Start: 2, Cookies: C{8: 1}},
		}},
		{name: "the losing group without another cookie gets none", want: map[string]kernel.Cookie{"g": 7}, obs: []observation{
			{ID: "a", Group: "g", Start: 1, Cookies: C{7: 1}},
			{ID: "b", Group: "h", Start: 2, Cookies: C{7: 4}},
		}},
		{name: "a member's tie: the smaller cookie", want: map[string]kernel.Cookie{"g": 7}, obs: []observation{
			{ID: "a", Group: "g", Start: 1, Cookies: C{9: 2, 7: 2, 8: 1}},
		}},
		{name: "a member's vote is not the smaller cookie of fewer tasks", want: map[string]kernel.Cookie{"g": 7}, obs: []observation{
			{ID: "a", Group: "g", Start: 1, Cookies: C{7: 3, 5: 1, 6: 2}},
		}},
		{name: "a member without a group does not vote", want: map[string]kernel.Cookie{"g": 8}, obs: []observation{
			{ID: "a", Group: "", Start: 1, Cookies: C{7: 5}},
			{ID: "b", Group: "g", Start: 2, Cookies: C{8: 1}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Cookies are counted in a map: the answer must not depend on the order it is read in.
			for range 64 {
				if got := converge(tc.obs); !maps.Equal(got, tc.want) {
					t.Fatalf("converge = %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestBook(t *testing.T) {
	b := newBook()
	g, _ := coresched.GroupFor(coresched.ByNamespace, coresched.SharedGroups{},
		coresched.Pod{Namespace: "ns", Labels: map[string]string{coresched.LabelGroup: "a"}})
	b.put(member{ID: "x", Group: g, Cgroup: "/x", State: StateOK}, 7)
	b.put(member{ID: "y", Group: g, Cgroup: "/y", State: StateOK}, 7)
	b.put(member{ID: "n", Group: coresched.Group{}, Cgroup: "/n", State: StateNone}, 0)
	if m, c, ok := b.inCgroup("/y"); !ok || m.ID != "y" || c != 7 {
		t.Errorf("inCgroup(/y) = %v %v %v", m.ID, c, ok)
	}
	if _, c, ok := b.inCgroup("/n"); !ok || c != 0 {
		t.Errorf("inCgroup(/n): cookie %v %v, want 0", c, ok)
	}
	if ids := ids(b.sources(g)); !slices.Equal(ids, []string{"x", "y"}) {
		t.Errorf("sources %v: want the order they joined", ids)
	}
	b.put(member{ID: "x", Group: g, Cgroup: "/x", State: StateFailed}, 0) // x again, now failed
	if ids := ids(b.sources(g)); !slices.Equal(ids, []string{"y"}) {
		t.Errorf("sources after x failed: %v", ids)
	}
	if ids := ids(b.list()); !slices.Equal(ids, []string{"n", "x", "y"}) {
		t.Errorf("list %v: want every member by ID", ids)
	}
	if f := b.remove("y"); f != "group:ns/a" || b.cookie(g) != 0 {
		t.Errorf("remove last member: forgot %q, cookie %v", f, b.cookie(g))
	}
	if f := b.remove("y"); f != "" {
		t.Errorf("second remove forgot %q", f)
	}
}

func ids(ms []member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

func TestReadCookies(t *testing.T) {
	n := newFakeNode(t)
	n.spawn("/a", 110, 111)
	n.setCookie(7, 111)
	got := ReadCookies(n, n.proc, []int{110, 999})
	if len(got) != 3 || got[0].Cookie != 0 || got[1].Tid != 111 || got[1].Cookie != 7 || got[2].Err == nil {
		t.Errorf("ReadCookies = %+v", got)
	}
}
