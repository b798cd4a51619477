package admission

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The component deploy/admission-policy: its objects carry this label.
const policyComponent = "admission-policy"

// policyBuild is what a build of deploy/ holds of the admission policies.
type policyBuild struct {
	policies   map[string]admissionregistrationv1.ValidatingAdmissionPolicy
	bindings   map[string]admissionregistrationv1.ValidatingAdmissionPolicyBinding
	configMaps map[string]corev1.ConfigMap // every ConfigMap of the build, by name
	objects    []object
}

// buildPolicies builds a copy of deploy/ (namespace movedNamespace) with cert-manager in place of
// certs and the kustomization lines edits (regexp → replacement), and decodes the policies,
// bindings and ConfigMaps strictly as their API types.
func buildPolicies(t *testing.T, edits map[string]string) policyBuild {
	t.Helper()
	dir := copyDeploy(t)
	editKustomization(t, dir, edits)
	out := kustomizeBuilder(t)(t, dir)
	if s := string(out); strings.Contains(s, "${") || strings.Contains(s, shippedNamespace) {
		t.Errorf("the build still holds a ${...} placeholder or %s", shippedNamespace)
	}
	b := policyBuild{policies: map[string]admissionregistrationv1.ValidatingAdmissionPolicy{},
		bindings: map[string]admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, configMaps: map[string]corev1.ConfigMap{}}
	b.objects = splitObjects(t, out)
	for _, o := range b.objects {
		switch o.kind {
		case "ValidatingAdmissionPolicy":
			var p admissionregistrationv1.ValidatingAdmissionPolicy
			decode(t, o, &p)
			if p.Labels["app.kubernetes.io/component"] == policyComponent {
				b.policies[p.Name] = p
			}
		case "ValidatingAdmissionPolicyBinding":
			var p admissionregistrationv1.ValidatingAdmissionPolicyBinding
			decode(t, o, &p)
			if p.Labels["app.kubernetes.io/component"] == policyComponent {
				b.bindings[p.Name] = p
			}
		case "ConfigMap":
			var c corev1.ConfigMap
			decode(t, o, &c)
			b.configMaps[c.Name] = c
		}
	}
	return b
}

// The kustomization edits of the two recipes: the component beside the webhook, and no webhook.
var (
	withPolicies = map[string]string{`(?m)^(\s*)- certs\b.*$`: "${1}- cert-manager",
		`(?m)^(\s*)# - admission-policy$`: "${1}- admission-policy"}
	noWebhook = map[string]string{`(?m)^\s*- certs\n`: "",
		`(?m)^(\s*)# - admission-policy$`: "${1}- admission-policy\n${1}- admission-policy/no-webhook"}
)

// TestAdmissionPolicyComponent builds deploy/ with the component admission-policy (in another
// namespace) and checks what its README promises of every policy: pod CREATE only, failing
// closed, one binding of its name that leaves out podfence's own namespace, Deny (Warn for
// Koordinator's label), messages on one line; the EPC maximum alone reads a parameter, the
// build's ConfigMap, and is skipped (not failing every pod) when it is missing.
func TestAdmissionPolicyComponent(t *testing.T) {
	b := buildPolicies(t, withPolicies)
	want := []string{"podfence-core-sched", "podfence-core-sched-koordinator", "podfence-epc", "podfence-epc-maximum",
		"podfence-pinning", "podfence-pool-resources"}
	checkPolicies(t, b, want)
	if _, ok := b.policies["podfence-request-annotations"]; ok {
		t.Errorf("podfence-request-annotations without no-webhook: it would refuse the mutating webhook's own annotation")
	}
	for name, p := range b.policies {
		if (p.Spec.ParamKind != nil) != (name == "podfence-epc-maximum") {
			t.Errorf("%s: paramKind %+v: only podfence-epc-maximum reads one (a missing parameter skips the whole policy)", name, p.Spec.ParamKind)
		}
	}
	p := b.policies["podfence-epc-maximum"]
	if k := p.Spec.ParamKind; k == nil || k.APIVersion != "v1" || k.Kind != "ConfigMap" {
		t.Fatalf("podfence-epc-maximum: paramKind %+v, want v1 ConfigMap", k)
	}
	ref := b.bindings["podfence-epc-maximum"].Spec.ParamRef
	if ref == nil || ref.Name != "podfence-admission-policy" || ref.Namespace != movedNamespace || ref.ParameterNotFoundAction == nil ||
		*ref.ParameterNotFoundAction != admissionregistrationv1.AllowAction {
		t.Fatalf("binding podfence-epc-maximum: paramRef %+v, want %s/podfence-admission-policy, parameterNotFoundAction Allow",
			ref, movedNamespace)
	}
	cm, ok := b.configMaps[ref.Name]
	if !ok || cm.Namespace != movedNamespace {
		t.Fatalf("ConfigMap %s/%s is not in the build", movedNamespace, ref.Name)
	}
	if q, err := resource.ParseQuantity(cm.Data["maxEPC"]); err != nil || q.Sign() <= 0 {
		t.Errorf("ConfigMap %s: maxEPC=%q: want a quantity of bytes above 0 (%v)", cm.Name, cm.Data["maxEPC"], err)
	}
}

// TestAdmissionPolicyNoWebhook builds deploy/ as admission-policy/no-webhook's recipe says
// (certs out, both components in): no webhook object is left, the agent and its ConfigMaps
// are, and the policy on podfence's own request annotations is bound.
func TestAdmissionPolicyNoWebhook(t *testing.T) {
	b := buildPolicies(t, noWebhook)
	checkPolicies(t, b, []string{"podfence-core-sched", "podfence-core-sched-koordinator", "podfence-epc", "podfence-epc-maximum",
		"podfence-pinning", "podfence-pool-resources", "podfence-request-annotations"})
	for _, o := range b.objects {
		if strings.HasSuffix(o.kind, "WebhookConfiguration") || o.name == "podfence-webhook" || o.kind == "Secret" {
			t.Errorf("%s in a build without the webhook", o)
		}
	}
	has := func(kind, name string) bool {
		return slices.ContainsFunc(b.objects, func(o object) bool { return o.kind == kind && o.name == name })
	}
	for _, k := range [][2]string{{"DaemonSet", "podfence-agent"}, {"ConfigMap", "podfence-pools"},
		{"ConfigMap", "podfence-coresched-profiles"}, {"ValidatingAdmissionPolicy", "podfence-agent-node-patch"}} {
		if !has(k[0], k[1]) {
			t.Errorf("no %s %s in a build without the webhook", k[0], k[1])
		}
	}
}

// checkPolicies checks the policies and bindings of the component: exactly the names want.
func checkPolicies(t *testing.T, b policyBuild, want []string) {
	t.Helper()
	var names []string
	for name := range b.policies {
		names = append(names, name)
	}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Fatalf("policies %v, want %v", names, want)
	}
	for _, name := range names {
		p, bind := b.policies[name], b.bindings[name]
		if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionregistrationv1.Fail {
			t.Errorf("%s: failurePolicy %v, want Fail", name, p.Spec.FailurePolicy)
		}
		r := p.Spec.MatchConstraints.ResourceRules
		if len(r) != 1 || !slices.Equal(r[0].Operations, []admissionregistrationv1.OperationType{admissionregistrationv1.Create}) ||
			!slices.Equal(r[0].Resources, []string{"pods"}) || !slices.Equal(r[0].APIGroups, []string{""}) {
			t.Errorf("%s: resourceRules %+v, want pod CREATE", name, r)
		}
		if len(p.Spec.Validations) == 0 {
			t.Errorf("%s: no validations", name)
		}
		for i, v := range p.Spec.Validations {
			if v.Expression == "" || v.MessageExpression == "" || v.Message == "" || strings.ContainsAny(v.Message, "\r\n") {
				t.Errorf("%s: validation %d: want an expression, a messageExpression and a one-line message: %+v", name, i, v)
			}
		}
		if bind.Spec.PolicyName != name {
			t.Errorf("%s: no binding of that name (policyName %q)", name, bind.Spec.PolicyName)
			continue
		}
		action := admissionregistrationv1.Deny
		if name == "podfence-core-sched-koordinator" {
			action = admissionregistrationv1.Warn // Koordinator admits the value
		}
		if !slices.Equal(bind.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{action}) {
			t.Errorf("binding %s: validationActions %v, want [%s]", name, bind.Spec.ValidationActions, action)
		}
		var sel []string
		if m := bind.Spec.MatchResources; m != nil && m.NamespaceSelector != nil {
			for _, e := range m.NamespaceSelector.MatchExpressions {
				sel = append(sel, fmt.Sprintf("%s %s %v", e.Key, e.Operator, e.Values))
			}
		}
		if want := fmt.Sprintf("kubernetes.io/metadata.name NotIn [%s]", movedNamespace); !slices.Equal(sel, []string{want}) {
			t.Errorf("binding %s: namespaceSelector %v, want %s (as the webhook configurations)", name, sel, want)
		}
	}
}

// TestAdmissionPolicyWords checks that the policies say what the webhook says: each rule text
// the webhook (Mutate, Validate, Warnings) gives for a broken pod is in the CEL of the policy
// that checks it, and the bounds it names are the webhook's.
func TestAdmissionPolicyWords(t *testing.T) {
	b := buildPolicies(t, withPolicies)
	celOf := func(name string) string {
		p, ok := b.policies[name]
		if !ok {
			t.Fatalf("no policy %s", name)
		}
		var parts []string
		for _, v := range p.Spec.Variables {
			parts = append(parts, v.Expression)
		}
		for _, v := range p.Spec.Validations {
			parts = append(parts, v.Expression, v.MessageExpression)
		}
		return strings.ReplaceAll(strings.Join(parts, "\n"), `\'`, "'") // CEL's escape in single-quoted strings
	}
	mutate := func(pod *corev1.Pod) string {
		_, _, err := Mutate(pod, nil)
		return fmt.Sprint(err)
	}
	validate := func(pod *corev1.Pod) string { return fmt.Sprint(Validate(pod, nil)) }
	warn := func(pod *corev1.Pod) string { return strings.Join(Warnings(pod), "\n") }
	long := strings.Repeat("c", 54)
	for _, c := range []struct {
		name, policy string
		got          string
		after        string // the rule is the message after this
		before       string // and before this ("": to its end)
	}{
		{name: "exclusive amount", policy: "podfence-pool-resources", got: mutate(testPod("ns", ctr("app", "podfence.io/exclusive_a=0"))),
			after: "=0: "},
		{name: "shared amount", policy: "podfence-pool-resources",
			got: mutate(testPod("ns", ctr("app", "podfence.io/shared_s=8192001"))), after: "=8192001: "},
		{name: "two domains", policy: "podfence-pool-resources",
			got: mutate(testPod("ns", ctr("app", "podfence.io/exclusive_a=1", "nokia.k8s.io/exclusive_a=1"))), after: "nokia.k8s.io/exclusive_a"},
		{name: "two shared pools", policy: "podfence-pool-resources",
			got: mutate(testPod("ns", ctr("app", "podfence.io/shared_a=1", "podfence.io/shared_b=1"))), after: "=1: ",
			before: "podfence.io/shared_a"},
		{name: "EPC amount", policy: "podfence-epc", got: mutate(testPod("ns", ctr("app", ResourceEPC+"=0"))), after: "=0: "},
		{name: "EPC container name", policy: "podfence-epc", got: mutate(testPod("ns", ctr(long, ResourceEPC+"=1Mi"))), after: "=1Mi: ",
			before: "54"},
		{name: "EPC annotation", policy: "podfence-epc", got: validate(testPod("ns", ctr("app"), "annotation:epc-limit.nri.io=64MB")),
			after: `="64MB": `, before: "want"},
		{name: "EPC annotation, what is allowed", policy: "podfence-epc",
			got: validate(testPod("ns", ctr("app"), "annotation:epc-limit.nri.io=64MB")), after: "not a number of bytes: "},
		{name: "core-sched policy", policy: "podfence-core-sched",
			got: validate(testPod("ns", ctr("app"), "label:podfence.io/core-sched-policy=x")), after: `="x"`},
		{name: "Koordinator policy", policy: "podfence-core-sched-koordinator",
			got: warn(testPod("ns", ctr("app"), "label:koordinator.sh/core-sched-policy=x")), after: `="x"`, before: "the node's"},
		{name: "Koordinator policy, no group", policy: "podfence-core-sched-koordinator",
			got: warn(testPod("ns", ctr("app"), "label:koordinator.sh/core-sched-policy=x")), after: "joins "},
		{name: "Koordinator policy and group", policy: "podfence-core-sched-koordinator",
			got:   warn(testPod("ns", ctr("app"), "label:koordinator.sh/core-sched-policy=x", "label:koordinator.sh/core-sched-group-id=g")),
			after: "joins ", before: " g"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, rule, ok := strings.Cut(c.got, c.after)
			if c.before != "" {
				rule, _, _ = strings.Cut(rule, c.before)
			}
			if !ok || rule == "" {
				t.Fatalf("the webhook's message %q has no rule after %q", c.got, c.after)
			}
			if !strings.Contains(celOf(c.policy), rule) {
				t.Errorf("policy %s does not say the webhook's %q", c.policy, rule)
			}
		})
	}
	pools := celOf("podfence-pool-resources")
	for _, bound := range []int64{maxCPUs, maxMilliCPU} {
		if !strings.Contains(pools, fmt.Sprintf("asInteger() <= %d)", bound)) {
			t.Errorf("podfence-pool-resources: no bound asInteger() <= %d, the webhook's", bound)
		}
	}
	got := mutate(testPod("ns", ctr(strings.Repeat("c", 53), ResourceEPC+"=1Mi")))
	if got != "<nil>" || !strings.Contains(celOf("podfence-epc"), "size(p[1]) > 53") {
		t.Errorf("a 53-character container name with an EPC limit: the webhook says %s; the policy must refuse only longer names", got)
	}
}
