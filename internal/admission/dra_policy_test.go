package admission

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
)

// nodeClaim is the user-info key of a bound token's node.
const nodeClaim = "authentication.kubernetes.io/node-name"

// saUser is service account name of namespace movedNamespace, with the node claim of a token
// bound to node ("" for a token without one).
func saUser(name, node string) user.Info {
	u := &user.DefaultInfo{Name: "system:serviceaccount:" + movedNamespace + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + movedNamespace, "system:authenticated"}}
	if node != "" {
		u.Extra = map[string][]string{nodeClaim: {node}, "authentication.kubernetes.io/pod-name": {name + "-x1"}}
	}
	return u
}

// policyOf returns the ValidatingAdmissionPolicy name of the build and checks its binding:
// of the same name, Deny, no parameters.
func policyOf(t *testing.T, objs []object, name string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	var p *admissionregistrationv1.ValidatingAdmissionPolicy
	var b *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for _, o := range objs {
		switch {
		case o.kind == "ValidatingAdmissionPolicy" && o.name == name:
			p = &admissionregistrationv1.ValidatingAdmissionPolicy{}
			decode(t, o, p)
		case o.kind == "ValidatingAdmissionPolicyBinding" && o.name == name:
			b = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
			decode(t, o, b)
		}
	}
	if p == nil || b == nil {
		t.Fatalf("no ValidatingAdmissionPolicy and binding %s in the build", name)
	}
	if b.Spec.PolicyName != name || !slices.Equal(b.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{"Deny"}) ||
		b.Spec.ParamRef != nil {
		t.Errorf("binding %s: %+v, want policy %s, Deny, no parameters", name, b.Spec, name)
	}
	if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("policy %s: failurePolicy %v, want Fail", name, p.Spec.FailurePolicy)
	}
	return p
}

func slice(driver, node string) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{TypeMeta: metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSlice"},
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver + "-abcde"},
		Spec: resourceapi.ResourceSliceSpec{Driver: driver, Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{{Name: "cpu-3"}}}}
	if node == "" {
		s.Spec.AllNodes = new(true)
	} else {
		s.Spec.NodeName = new(node)
	}
	return s
}

// TestDRAResourceSlicePolicy evaluates the component's ValidatingAdmissionPolicy as the API
// server does: the driver's service account, with a token bound to node-a, may create,
// update and delete slices of driver dra.podfence.io on node-a and nothing else: not another
// node's, not one for all nodes, not another driver's, not without the node claim. Other
// users (the kubelet, another service account) are not its business.
func TestDRAResourceSlicePolicy(t *testing.T) {
	objs := draBuild(t)
	p := policyOf(t, objs, "podfence-dra-resourceslices")
	rules := p.Spec.MatchConstraints.ResourceRules
	if len(rules) != 1 || !slices.Equal(rules[0].APIGroups, []string{"resource.k8s.io"}) ||
		!slices.Equal(rules[0].Resources, []string{"resourceslices"}) ||
		!slices.Equal(rules[0].Operations, []admissionregistrationv1.OperationType{"CREATE", "UPDATE", "DELETE"}) {
		t.Errorf("matchConstraints %+v: want resourceslices of resource.k8s.io, CREATE, UPDATE and DELETE", rules)
	}
	const drv = "dra.podfence.io"
	gvk := resourceapi.SchemeGroupVersion.WithKind("ResourceSlice")
	gvr := resourceapi.SchemeGroupVersion.WithResource("resourceslices")
	driverA := saUser("podfence-dra", "node-a")
	mine, other := slice(drv, "node-a"), slice(drv, "node-b")
	moved := mine.DeepCopy()
	moved.Spec.NodeName = new("node-b")
	for _, tc := range []struct {
		name     string
		op       admission.Operation
		obj, old *resourceapi.ResourceSlice
		user     user.Info
		denied   string // "": allowed; else a part of the message
	}{
		{"create on its node", admission.Create, mine, nil, driverA, ""},
		{"update on its node", admission.Update, mine, mine, driverA, ""},
		{"delete on its node", admission.Delete, nil, mine, driverA, ""},
		{"create on another node", admission.Create, other, nil, driverA,
			"may write only the ResourceSlices of its own node: its token is bound to node node-a, this slice is of node node-b"},
		{"update on another node", admission.Update, other, other, driverA, "this slice is of node node-b and of node node-b"},
		{"delete on another node", admission.Delete, nil, other, driverA, "this slice is of node node-b"},
		{"update moving its slice to another node", admission.Update, moved, mine, driverA, "this slice is of node node-b and of node node-a"},
		{"update taking another node's slice", admission.Update, mine, other, driverA, "this slice is of node node-a and of node node-b"},
		{"create for all nodes", admission.Create, slice(drv, ""), nil, driverA, "this slice is not of one node"},
		{"create of another driver on its node", admission.Create, slice("gpu.example.com", "node-a"), nil, driverA,
			"may write only ResourceSlices of driver dra.podfence.io, not of gpu.example.com"},
		{"create without node claim", admission.Create, mine, nil, saUser("podfence-dra", ""), "its token names no node"},
		{"delete without node claim", admission.Delete, nil, mine, saUser("podfence-dra", ""), "its token names no node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var obj, old runtime.Object
			if tc.obj != nil {
				obj = tc.obj
			}
			if tc.old != nil {
				old = tc.old
			}
			name := map[bool]*resourceapi.ResourceSlice{true: tc.obj, false: tc.old}[tc.obj != nil].Name
			got := evalPolicy(t, p, vapRequest{op: tc.op, obj: obj, old: old, gvk: gvk, gvr: gvr, name: name, user: tc.user})
			switch {
			case !got.matched:
				t.Errorf("the policy does not apply to %s", tc.user.GetName())
			case tc.denied == "" && got.denied != "":
				t.Errorf("denied: %s; want allowed", got.denied)
			case tc.denied != "" && !strings.Contains(got.denied, tc.denied):
				t.Errorf("decision %q, want denied with %q", got.denied, tc.denied)
			}
		})
	}
	for _, u := range []user.Info{saUser("podfence-agent", "node-a"), saUser("other-dra", "node-a"),
		&user.DefaultInfo{Name: "system:node:node-b", Groups: []string{"system:nodes"}}} {
		got := evalPolicy(t, p, vapRequest{op: admission.Delete, old: mine, gvk: gvk, gvr: gvr, name: mine.Name, user: u})
		if got.matched {
			t.Errorf("the policy applies to %s (decision %q); want only podfence-dra", u.GetName(), got.denied)
		}
	}
}

// TestAgentNodePatchPolicy evaluates deploy/agent/node-patch-policy.yaml the same way: the
// agent patches its own Node's podfence label, not another Node, not another label.
func TestAgentNodePatchPolicy(t *testing.T) {
	p := policyOf(t, draBuild(t), "podfence-agent-node-patch")
	gvk, gvr := corev1.SchemeGroupVersion.WithKind("Node"), corev1.SchemeGroupVersion.WithResource("nodes")
	node := func(name string, labels map[string]string) *corev1.Node {
		return &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	agent := saUser("podfence-agent", "node-a")
	for _, tc := range []struct {
		name, node, key, denied string
	}{
		{"its label on its node", "node-a", "podfence.io/core-sched", ""},
		{"its label on another node", "node-b", "podfence.io/core-sched", "its token is bound to node node-a, not to node-b"},
		{"another label on its node", "node-a", "team", "this request changes labels team"},
	} {
		got := evalPolicy(t, p, vapRequest{op: admission.Update, obj: node(tc.node, map[string]string{tc.key: "x"}),
			old: node(tc.node, nil), gvk: gvk, gvr: gvr, name: tc.node, user: agent})
		if !got.matched || tc.denied == "" && got.denied != "" || tc.denied != "" && !strings.Contains(got.denied, tc.denied) {
			t.Errorf("%s: %+v, want %s", tc.name, got, fmt.Sprintf("denied with %q", tc.denied))
		}
	}
}
