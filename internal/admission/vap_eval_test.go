package admission

import (
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
)

// vapRequest is one request a ValidatingAdmissionPolicy is evaluated on.
type vapRequest struct {
	op       admission.Operation
	obj, old runtime.Object
	gvk      schema.GroupVersionKind
	gvr      schema.GroupVersionResource
	name     string
	user     user.Info
}

// vapOutcome is what the policy decided: matched (its match conditions held), and the
// message of the first validation that denied ("" when every one admitted).
type vapOutcome struct {
	matched bool
	denied  string
}

// evalPolicy compiles p's match conditions, variables, validations and message expressions
// as the API server's validating admission policy plugin does (validating.compilePolicy,
// with the base CEL environment of this k8s.io/apiserver) and evaluates them on r, as the
// API server does once r passed the policy's matchConstraints. Evaluation errors fail the test.
func evalPolicy(t *testing.T, p *admissionregistrationv1.ValidatingAdmissionPolicy, r vapRequest) vapOutcome {
	t.Helper()
	opts := plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
	comp, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		t.Fatal(err)
	}
	var vars []plugincel.NamedExpressionAccessor
	for _, v := range p.Spec.Variables {
		vars = append(vars, &validating.Variable{Name: v.Name, Expression: v.Expression})
	}
	comp.CompileAndStoreVariables(vars, opts, environment.StoredExpressions)
	var conds, vals, msgs []plugincel.ExpressionAccessor
	for i := range p.Spec.MatchConditions {
		conds = append(conds, (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i]))
	}
	for _, v := range p.Spec.Validations {
		vals = append(vals, &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason})
		var m plugincel.ExpressionAccessor
		if v.MessageExpression != "" {
			m = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
		msgs = append(msgs, m)
	}
	var matcher matchconditions.Matcher
	if len(conds) > 0 {
		matcher = matchconditions.NewMatcher(comp.CompileCondition(conds, opts, environment.StoredExpressions), p.Spec.FailurePolicy,
			"policy", "validate", p.Name)
	}
	v := validating.NewValidator(comp.CompileCondition(vals, opts, environment.StoredExpressions), matcher,
		comp.CompileCondition(nil, opts, environment.StoredExpressions),
		comp.CompileCondition(msgs, plugincel.OptionalVariableDeclarations{}, environment.StoredExpressions), p.Spec.FailurePolicy, nil)
	attrs := admission.NewAttributesRecord(r.obj, r.old, r.gvk, "", r.name, r.gvr, "", r.op, nil, false, r.user)
	va := &admission.VersionedAttributes{Attributes: attrs, VersionedKind: r.gvk, VersionedObject: admission.NewLazyObject(r.obj), VersionedOldObject: admission.NewLazyObject(r.old)}
	res := v.Validate(context.Background(), r.gvr, va, nil, nil, celconfig.RuntimeCELCostBudget, nil)
	out := vapOutcome{matched: len(res.Decisions) > 0}
	for _, d := range res.Decisions {
		switch d.Evaluation {
		case validating.EvalError:
			t.Fatalf("policy %s on %s %s: evaluation error: %s", p.Name, r.op, r.name, d.Message)
		case validating.EvalDeny:
			if out.denied == "" {
				out.denied = d.Message
			}
		}
	}
	return out
}
