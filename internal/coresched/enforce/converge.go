package enforce

import (
	"cmp"
	"slices"

	"github.com/podfence/podfence/internal/coresched/kernel"
)

// observation is what a restart finds of one member: the cookies its tasks carry.
type observation struct {
	ID      string
	Group   string                // Group.ID()
	Start   uint64                // start time of its oldest process
	Cookies map[kernel.Cookie]int // number of tasks per cookie, 0 included
}

// vote is the non-zero cookie most of the member's tasks carry (ties: the smaller value),
// or 0 when none has one.
func (o observation) vote() kernel.Cookie {
	var best kernel.Cookie
	for c, n := range o.Cookies {
		if c == 0 {
			continue
		}
		if best == 0 || n > o.Cookies[best] || n == o.Cookies[best] && c < best {
			best = c
		}
	}
	return best
}

// converge chooses one cookie per group from what live tasks carry, so that a restarted
// agent keeps every healthy member as it is and repairs only the rest:
//
//   - each member votes for the cookie most of its tasks carry;
//   - a group takes the cookie with the most votes, ties going to the oldest voter's;
//   - a cookie belongs to one group only: if two groups' members carry it, the one with more
//     votes (then the older voter) keeps it and the other takes its next choice.
//
// A group missing from the result has no usable cookie: its oldest member must create one.
func converge(obs []observation) map[string]kernel.Cookie {
	type cand struct {
		group  string
		cookie kernel.Cookie
		votes  int
		oldest uint64
	}
	type key struct {
		group  string
		cookie kernel.Cookie
	}
	byKey := map[key]*cand{}
	var cands []*cand
	for _, o := range obs {
		c := o.vote()
		if c == 0 || o.Group == "" {
			continue
		}
		k := key{o.Group, c}
		if byKey[k] == nil {
			byKey[k] = &cand{group: o.Group, cookie: c, oldest: o.Start}
			cands = append(cands, byKey[k])
		}
		byKey[k].votes++
		byKey[k].oldest = min(byKey[k].oldest, o.Start)
	}
	slices.SortFunc(cands, func(a, b *cand) int {
		return cmp.Or(cmp.Compare(b.votes, a.votes), cmp.Compare(a.oldest, b.oldest),
			cmp.Compare(a.group, b.group), cmp.Compare(a.cookie, b.cookie))
	})
	out := map[string]kernel.Cookie{}
	taken := map[kernel.Cookie]bool{}
	for _, c := range cands {
		if _, done := out[c.group]; done || taken[c.cookie] {
			continue
		}
		out[c.group] = c.cookie
		taken[c.cookie] = true
	}
	return out
}
