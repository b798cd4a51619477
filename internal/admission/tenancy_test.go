package admission

import (
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/podfence/podfence/internal/coresched"
)

// TestTenancy: a core-scheduling label never reaches past the pod's trust boundary. A group
// the profiles share is open to their namespaces only; a profile that selects a pod decides
// its group or policy, which the pod's own labels may repeat or narrow to exclusive only.
// Koordinator's labels follow the same rules. /mutate leaves such labels; /validate refuses.
func TestTenancy(t *testing.T) {
	srv := newTestServer(t, testConfig(t))
	const (
		group  = "podfence.io/core-sched-group"
		policy = "podfence.io/core-sched-policy"
		kgroup = "koordinator.sh/core-sched-group-id"
		kpol   = "koordinator.sh/core-sched-policy"
		joinA  = `namespace "tenant-b" may not join core-scheduling group tenant-a, which the core-scheduling profiles share among ` +
			`namespaces tenant-a, tenant-a-dev only (a group name is its namespace's unless a profile shares it: choose another ` +
			`name, or ask the cluster operator to add tenant-b to that profile)`
		only = `; a pod's own labels may only repeat that or ask for policy exclusive (remove the label to take the profile's)`
	)
	pod := func(ns string, labels ...string) *corev1.Pod {
		items := []any{ctr("app")}
		for i := 0; i+1 < len(labels); i += 2 {
			items = append(items, "label:"+labels[i]+"="+labels[i+1])
		}
		return testPod(ns, items...)
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		msg  string // "" to admit
	}{
		// A shared group, named from outside its namespaces.
		{name: "B names A's shared group", pod: pod("tenant-b", group, "tenant-a"),
			msg: `label podfence.io/core-sched-group="tenant-a": ` + joinA},
		{name: "B names A's shared group, Koordinator's label", pod: pod("tenant-b", kgroup, "tenant-a"),
			msg: `label koordinator.sh/core-sched-group-id="tenant-a": ` + joinA},
		{name: "B names telco's group", pod: pod("tenant-b", group, "dataplane"),
			msg: `label podfence.io/core-sched-group="dataplane": namespace "tenant-b" may not join core-scheduling group dataplane, ` +
				`which the core-scheduling profiles share among namespaces telco only (a group name is its namespace's unless a ` +
				`profile shares it: choose another name, or ask the cluster operator to add tenant-b to that profile)`},
		{name: "A names its shared group", pod: pod("tenant-a", group, "tenant-a")},
		{name: "A's second namespace, Koordinator's label", pod: pod("tenant-a-dev", kgroup, "tenant-a")},
		{name: "A, a pod the profile does not select, names A's group", pod: pod("tenant-a", "tier", "debug", group, "tenant-a")},
		{name: "A, its own group", pod: pod("tenant-a", "tier", "debug", group, "scratch")},
		{name: "B, a group of its own", pod: pod("tenant-b", group, "scratch")},
		{name: "B, a name shared by nobody (the agent scopes it to B)", pod: pod("tenant-b", kgroup, "tenant-c")},
		{name: "B, exclusive: the group name is ignored", pod: pod("tenant-b", policy, "exclusive", group, "tenant-a")},
		{name: "B, no label", pod: pod("tenant-b")},

		// A profile selects the pod: its labels contradict it.
		{name: "another group than the profile's", pod: pod("telco", "tier", "dataplane", group, "mine"),
			msg: `label podfence.io/core-sched-group="mine": core-scheduling profile 0 (telco-dataplane) selects this pod and ` +
				`gives it group dataplane` + only},
		{name: "a group where the profile says exclusive", pod: pod("batch", group, "mine"),
			msg: `label podfence.io/core-sched-group="mine": core-scheduling profile 1 (batch) selects this pod and gives it ` +
				`policy exclusive` + only},
		{name: "none where the profile says exclusive, Koordinator's label", pod: pod("batch", kpol, "none"),
			msg: `label koordinator.sh/core-sched-policy="none": core-scheduling profile 1 (batch) selects this pod and gives it ` +
				`policy exclusive` + only},
		{name: "none where the profile gives a group", pod: pod("tenant-a", policy, "none"),
			msg: `label podfence.io/core-sched-policy="none": core-scheduling profile 2 selects this pod and gives it ` +
				`group tenant-a` + only},
		{name: "an empty group label to escape the profile", pod: pod("tenant-a", group, ""),
			msg: `label podfence.io/core-sched-group="": core-scheduling profile 2 selects this pod and gives it group tenant-a` + only},
		{name: "podfence's label wins over an agreeing Koordinator one", pod: pod("tenant-a", group, "other", kgroup, "tenant-a"),
			msg: `label podfence.io/core-sched-group="other": core-scheduling profile 2 selects this pod and gives it ` +
				`group tenant-a` + only},
		{name: "the profile's group, Koordinator's label", pod: pod("telco", "tier", "dataplane", kgroup, "dataplane")},
		{name: "exclusive where the profile gives a group", pod: pod("telco", "tier", "dataplane", kpol, "exclusive")},
		{name: "exclusive, as the profile says", pod: pod("batch", policy, "exclusive")},
		{name: "an unknown Koordinator policy reads as the default, which the profile does not give", pod: pod("batch", kpol, "Exclusive"),
			msg: `label koordinator.sh/core-sched-policy="Exclusive": core-scheduling profile 1 (batch) selects this pod and gives it ` +
				`policy exclusive` + only},
		{name: "an unknown Koordinator policy with the profile's group", pod: pod("tenant-a", kpol, "strict", kgroup, "tenant-a")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := reviewJSON(t, tc.pod)
			if _, raw, resp := post(t, srv, PathMutate, body); !resp.Allowed || len(resp.Patch) != 0 {
				t.Errorf("/mutate: want allowed without a patch: %s", raw)
			}
			status, raw, resp := post(t, srv, PathValidate, body)
			if status != http.StatusOK {
				t.Fatalf("/validate: status %d: %s", status, raw)
			}
			got := ""
			if resp.Result != nil {
				got = resp.Result.Message
			}
			if resp.Allowed != (tc.msg == "") || got != tc.msg {
				t.Errorf("/validate: allowed %v, message\n%s\nwant\n%s", resp.Allowed, got, tc.msg)
			}
		})
	}
}

// TestTenancyWithoutProfiles: without profiles no group spans namespaces, so any name is
// the pod's namespace's own and nothing is refused.
func TestTenancyWithoutProfiles(t *testing.T) {
	for _, cfg := range []*Config{nil, {}} {
		if err := Validate(testPod("tenant-b", "label:podfence.io/core-sched-group=tenant-a", ctr("app")), cfg); err != nil {
			t.Errorf("config %v: %v", cfg, err)
		}
	}
}

// TestSharedGroups: what the agent reads from the same profiles.
func TestSharedGroups(t *testing.T) {
	ps, err := ParseProfiles("p.yaml", []byte(profilesYAML+"- {group: everyone}\n- {namespaces: [x], group: dataplane}\n"+
		"- {namespaces: [y], group: solo, policy: exclusive}\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := SharedGroups(ps)
	if got, want := s.String(), "dataplane=telco,x everyone=* tenant-a=tenant-a,tenant-a-dev"; got != want {
		t.Errorf("shared groups %q, want %q", got, want)
	}
	for _, tc := range []struct {
		ns, group, id string
	}{
		{"tenant-a", "tenant-a", "group:tenant-a"},
		{"tenant-a-dev", "tenant-a", "group:tenant-a"},
		{"tenant-b", "tenant-a", "group:tenant-b/tenant-a"},
		{"y", "solo", "group:y/solo"},
		{"anywhere", "everyone", "group:everyone"},
	} {
		g, err := coresched.GroupFor(coresched.ByNamespace, s, coresched.Pod{Namespace: tc.ns,
			Labels: map[string]string{coresched.LabelGroup: tc.group}})
		if err != nil || g.ID() != tc.id {
			t.Errorf("%s/%s: %q, %v; want %q", tc.ns, tc.group, g.ID(), err, tc.id)
		}
	}
}
