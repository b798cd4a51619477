package plan

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/dra/grant"
)

// draPools: the test node (core c has threads c and c+8) in CPU-Pooler's cores meaning, with
// pools requested through DRA beside a device-plugin one.
const draPools = `
pools:
  default:     {cpus: "0,8"}
  shared_s:    {cpus: "1,9", requestAPI: dra}
  exclusive_d: {cpus: "2-3", hyperThreadingPolicy: multiThreaded, requestAPI: dra}
  exclusive_t: {cpus: "4-5", requestAPI: dra}
  exclusive_p: {cpus: "6-7", hyperThreadingPolicy: multiThreaded}
`

// claimPod is a pod (uid pod-1) whose container app uses the claims named (entry name = claim
// object name); a claim "tmpl:<name>" comes from a template, named in the pod's status;
// "tmpl-unmade" from a template with no claim made yet.
func claimPod(annotations string, claims ...string) string {
	var entries, refs, statuses []string
	for _, c := range claims {
		switch {
		case c == "tmpl-unmade":
			entries = append(entries, fmt.Sprintf("  - {name: %s, resourceClaimTemplateName: t}", c))
		case strings.HasPrefix(c, "tmpl:"):
			c = strings.TrimPrefix(c, "tmpl:")
			entries = append(entries, fmt.Sprintf("  - {name: e-%s, resourceClaimTemplateName: t}", c))
			statuses = append(statuses, fmt.Sprintf("  - {name: e-%s, resourceClaimName: %s}", c, c))
			c = "e-" + c
		default:
			entries = append(entries, fmt.Sprintf("  - {name: %s, resourceClaimName: %s}", c, c))
		}
		refs = append(refs, "{name: "+c+"}")
	}
	doc := "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns, uid: pod-1" + annotations + "}\nspec:\n"
	if len(entries) > 0 {
		doc += "  resourceClaims:\n" + strings.Join(entries, "\n") + "\n"
	}
	doc += "  containers:\n  - {name: app, resources: {claims: [" + strings.Join(refs, ", ") + "]}}\n"
	if len(statuses) > 0 {
		doc += "status:\n  resourceClaimStatuses:\n" + strings.Join(statuses, "\n") + "\n"
	}
	return doc
}

func claim(uid, name string, edit func(*grant.Grant)) grant.Grant {
	g := grant.Grant{ClaimUID: uid, Namespace: "ns", Name: name, PodUIDs: []string{"pod-1"}}
	edit(&g)
	return g
}

func exclusiveGrant(pool string, cpus ...int) func(*grant.Grant) {
	return func(g *grant.Grant) { g.Exclusive = map[string]cpuset.CPUSet{pool: cpuset.New(cpus...)} }
}

// TestPlanClaims: a container gets what the grants of its pod's claims give (named directly or
// made from a template, summed, each grant once), and is refused, in the agent's words, for a
// claim not reserved for its pod, two claims giving one CPU, a pool the node does not offer
// through DRA or does not have, CPUs outside the pool, or EPC beside an EPC limit annotation.
// A claim without a grant is another driver's.
func TestPlanClaims(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pod    string
		grants []grant.Grant
		want   string // the decision's CPUs, env and quota, or the refusal
	}{
		{name: "a claim named directly", pod: claimPod("", "c-a"),
			grants: []grant.Grant{claim("u1", "c-a", exclusiveGrant("exclusive_d", 3, 11))},
			want:   "cpus=3,11 EXCLUSIVE_CPUS=3,11 CPU_POOLS=exclusive CONTAINER_NAME=app quota=0"},
		{name: "a claim from a template, with another driver's", pod: claimPod("", "tmpl:c-b", "gpu", "tmpl-unmade"),
			grants: []grant.Grant{claim("u1", "c-b", exclusiveGrant("exclusive_t", 4))},
			want:   "cpus=4 EXCLUSIVE_CPUS=4 CPU_POOLS=exclusive CONTAINER_NAME=app quota=0"},
		{name: "two claims summed: CPUs and a share", pod: claimPod("", "c-a", "c-b"), grants: []grant.Grant{
			claim("u2", "c-b", func(g *grant.Grant) { g.Shared = map[string]int64{"shared_s": 300} }),
			claim("u1", "c-a", exclusiveGrant("exclusive_d", 2, 10))},
			want: "cpus=1-2,9-10 EXCLUSIVE_CPUS=2,10 SHARED_CPUS=1,9 CPU_POOLS=exclusive&shared CONTAINER_NAME=app quota=230000"},
		{name: "one claim named twice counts once", pod: claimPod("", "c-a", "c-a"),
			grants: []grant.Grant{claim("u1", "c-a", func(g *grant.Grant) { g.Shared = map[string]int64{"shared_s": 300} })},
			want:   "cpus=1,9 SHARED_CPUS=1,9 CPU_POOLS=shared quota=30000"},
		{name: "EPC only", pod: claimPod("", "c-a"), grants: []grant.Grant{claim("u1", "c-a", func(g *grant.Grant) { g.EPCBytes = 4096 })},
			want: "cpus=0,8 quota=0"},
		{name: "not reserved for the pod", pod: claimPod("", "c-a"), grants: []grant.Grant{claim("u1", "c-a", func(g *grant.Grant) {
			g.PodUIDs, g.Exclusive = []string{"other"}, map[string]cpuset.CPUSet{"exclusive_d": cpuset.New(2)}
		})}, want: `refused (DRAClaim): DRA claim u1: claim ns/c-a is reserved for pods other, not for pod ns/p (pod-1)`},
		{name: "two claims give one CPU", pod: claimPod("", "c-a", "c-b"), grants: []grant.Grant{
			claim("u2", "c-b", exclusiveGrant("exclusive_d", 2, 3)), claim("u1", "c-a", exclusiveGrant("exclusive_d", 3))},
			want: `refused (DRAClaim): DRA claim u2: exclusive pool "exclusive_d": CPUs 3 are also given by claim u1`},
		{name: "a pool not offered through DRA", pod: claimPod("", "c-a"),
			grants: []grant.Grant{claim("u1", "c-a", exclusiveGrant("exclusive_p", 6, 14))},
			want: `refused (DRAClaim): DRA claim u1: gives pool "exclusive_p", which this node's pool config does not offer ` +
				`through DRA (requestAPI: devicePlugin)`},
		{name: "an unknown pool", pod: claimPod("", "c-a"),
			grants: []grant.Grant{claim("u1", "c-a", func(g *grant.Grant) { g.Shared = map[string]int64{"shared_x": 100} })},
			want:   `refused (DRAClaim): DRA claim u1: gives shared pool "shared_x", which this node does not have`},
		{name: "an exclusive pool named as shared", pod: claimPod("", "c-a"),
			grants: []grant.Grant{claim("u1", "c-a", exclusiveGrant("shared_s", 1))},
			want:   `refused (DRAClaim): DRA claim u1: gives exclusive pool "shared_s", which this node does not have`},
		{name: "CPUs outside the pool", pod: claimPod("", "c-a"),
			grants: []grant.Grant{claim("u1", "c-a", exclusiveGrant("exclusive_d", 2, 6))},
			want:   `refused (DRAClaim): DRA claim u1: gives CPUs 6, which are not in exclusive pool "exclusive_d" (2-3,10-11)`},
		{name: "EPC twice", pod: claimPod(`, annotations: {epc-limit.nri.io/container.app: 1Mi}`, "c-a", "c-b"), grants: []grant.Grant{
			claim("u1", "c-a", func(g *grant.Grant) { g.EPCBytes = 4096 }), claim("u2", "c-b", func(g *grant.Grant) { g.EPCBytes = 1 })},
			want: `refused (DRAClaim): DRA claim u1,u2: gives SGX EPC 4097 bytes, but annotation epc-limit.nri.io/container.app="1Mi" ` +
				`sets the container's limit too: ask for EPC through the claim or the resource sgx.intel.com/epc, not both`},
		{name: "the pool asked otherwise too", pod: strings.Replace(claimPod("", "c-a"), "resources: {claims:",
			`resources: {limits: {podfence.io/exclusive_d: "1"}, claims:`, 1),
			grants: []grant.Grant{claim("u1", "c-a", exclusiveGrant("exclusive_d", 3))},
			want:   `refused (DRAClaim): DRA claim u1: gives pool "exclusive_d", which the container also asks for through its annotations or devices`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := nodeOf(t, "sockets=2,numa=2,cores=4,threads=2", draPools)
			s := NewLedger(n)
			rep := n.PlanPods(s, pods(t, tc.pod), tc.grants...)
			var got string
			switch {
			case len(rep.Refusals) == 1:
				r := rep.Refusals[0]
				got = fmt.Sprintf("refused (%s): %s", r.Code, r.Reason)
				if s.Len() != 0 {
					t.Errorf("a refused pod holds %v", s.Allocations())
				}
			case len(rep.Placed) == 1:
				d := rep.Placed[0].Decision
				got = fmt.Sprintf("cpus=%s %s quota=%d", d.CPUs, envText(d.Env), d.Quota)
				got = strings.Replace(got, " - ", " ", 1)
			default:
				t.Fatalf("placed %+v, refused %+v", rep.Placed, rep.Refusals)
			}
			if got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestPlanClaimsWithoutGrants: with no grants given, claims change nothing (podfence plan
// without --dra-state-dir).
func TestPlanClaimsWithoutGrants(t *testing.T) {
	n := nodeOf(t, "sockets=2,numa=2,cores=4,threads=2", draPools)
	rep := n.PlanPods(NewLedger(n), pods(t, claimPod("", "c-a")))
	if len(rep.Placed) != 1 || rep.Placed[0].Decision.CPUs.String() != "0,8" {
		t.Fatalf("placed %+v, refused %+v; want the default pool", rep.Placed, rep.Refusals)
	}
}
