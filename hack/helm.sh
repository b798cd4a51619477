#!/usr/bin/env bash
# The Helm chart deploy/helm/podfence beside the kustomize base deploy/ (`make chart`): keeps
# both true. It lints the chart, renders it with several value sets, validates every rendered
# object against its API type (hack/helmcheck validate: strict decoding, no server needed),
# and compares renderings with kustomize builds of deploy/, object by object, after
# normalising what Helm must differ in (hack/helmcheck compare; a difference is printed as the
# object and the field):
#
#   default values                  = deploy/ with hack/certs.sh (both certificates checked,
#                                     not compared: each side made its own)
#   namespace.create, TLS mode secret with hack/certs.sh's files
#                                   = deploy/ with the same files, exactly
#   cert-manager, extender on       = deploy/ with components cert-manager and extender
#   -n pf-moved                     = deploy/ with namespace: pf-moved (nothing names podfence-system)
#   admissionPolicy.enabled, TLS mode secret
#                                   = deploy/ with component admission-policy, exactly
#   admissionPolicy.enabled, webhook.enabled false
#                                   = deploy/ with components admission-policy and
#                                     admission-policy/no-webhook in place of certs
#   dra.enabled, TLS mode secret (Kubernetes 1.34)
#                                   = deploy/ with component dra, exactly
#   other values (domain, policies, node label, metrics auth, Prometheus objects)
#                                   the flags and objects they promise
#   bad values                      refused, naming the value
#
# Helm is installed once with `go install` through the Go module proxy (Debian has no helm
# package) and cached. Options:
#   --deploy DIR   compare with this copy of deploy/ instead (e.g. to see a difference fail)
#   --helm-path    only install helm (if needed) and print its path
# Environment: PODFENCE_HELM_CACHE (default /var/cache/podfence-helm), HELM (a helm binary to
# use instead), GO (default go).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
chart=$repo/deploy/helm/podfence
deploy=$repo/deploy
HELM_VERSION=v3.22.0
HELM_K8S_MINOR=37 # the minor version of helm $HELM_VERSION's k8s.io/client-go
KUBE_VERSION=1.31.0 # Capabilities.KubeVersion for helm (the node e2e's API server)
DRA_KUBE_VERSION=1.34.0 # the first with resource.k8s.io/v1, which dra.enabled needs
cache=${PODFENCE_HELM_CACHE:-/var/cache/podfence-helm}
go=${GO:-go}

die() {
	echo "helm.sh: $*" >&2
	exit 1
}

# helm_path: $HELM, or the cached helm $HELM_VERSION, built first if missing.
helm_path() {
	if [[ -n ${HELM:-} ]]; then
		echo "$HELM"
		return
	fi
	local dir=$cache/$HELM_VERSION
	if [[ ! -x $dir/helm ]]; then
		echo "helm.sh: building helm $HELM_VERSION into $dir (go install, about 2 minutes cold)" >&2
		mkdir -p "$dir"
		local tmp
		tmp=$(mktemp -d "$dir/.build.XXXXXX")
		# As helm's Makefile: its version, and the Kubernetes version `helm template` assumes
		# without --kube-version: its client-go's minor (v0.37 in helm v3.22).
		local x=helm.sh/helm/v3 ldflags="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
		for p in pkg/chartutil pkg/lint/rules; do
			ldflags+=" -X $x/$p.k8sVersionMajor=1 -X $x/$p.k8sVersionMinor=$HELM_K8S_MINOR"
		done
		GOBIN=$tmp GOFLAGS=-buildvcs=false "$go" install -ldflags "$ldflags" "$x/cmd/helm@$HELM_VERSION" >&2 || {
			rm -rf "$tmp"
			die "go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION failed"
		}
		mv "$tmp/helm" "$dir/helm"
		rm -rf "$tmp"
	fi
	echo "$dir/helm"
}

while (($#)); do
	case $1 in
	--deploy) deploy=$(cd "${2:?--deploy needs a directory}" && pwd) && shift ;;
	--helm-path)
		helm_path
		exit 0
		;;
	-h | --help)
		sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
		exit 2
		;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
	shift
done

helm=$(helm_path)
"$helm" version --short >/dev/null || die "$helm does not run"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$repo" && "$go" build -o "$tmp/helmcheck" ./hack/helmcheck) || die "go build ./hack/helmcheck failed"
check=$tmp/helmcheck

passed=0 failed=0
pass() {
	passed=$((passed + 1))
	printf 'PASS %s: %s\n' "$1" "$2"
}
fail() {
	failed=$((failed + 1))
	printf 'FAIL %s: %s\n' "$1" "$2"
}
# expect NAME CMD...: PASS with CMD's last line, or FAIL with it and then its whole output.
expect() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then
		pass "$name" "$(tail -n 1 <<<"$out")"
	else
		fail "$name" "$(tail -n 1 <<<"$out")"
		sed '$d; s/^/    /' <<<"$out"
	fi
}

# kustomize_copy DIR NAMESPACE [SED...]: deploy/ copied to DIR, with NAMESPACE and each sed
# expression applied to its kustomization.yaml; hack/certs.sh's files in DIR/certs.
kustomize_copy() {
	local dir=$1 ns=$2
	shift 2
	mkdir -p "$dir"
	cp -r "$deploy/." "$dir"
	rm -rf "$dir/certs" "$dir/helm"
	sed -i "s/^namespace: .*/namespace: $ns/" "$dir/kustomization.yaml"
	for e in "$@"; do sed -i "$e" "$dir/kustomization.yaml"; done
	bash "$repo/hack/certs.sh" -o "$dir/certs" 2>>"$tmp/certs.log" || die "hack/certs.sh failed: $(cat "$tmp/certs.log")"
	"$check" kustomize "$dir" >"$dir.yaml"
}

# render OUT NAMESPACE [HELM ARGS...]: helm template into OUT.
render() {
	local out=$1 ns=$2
	shift 2
	"$helm" template podfence "$chart" -n "$ns" --kube-version "$KUBE_VERSION" "$@" >"$out"
}

# secret_tls DIR: the values that give the chart hack/certs.sh's files in DIR.
secret_tls() {
	echo --set webhook.tls.mode=secret \
		--set-file "webhook.tls.secret.ca=$1/ca.crt,webhook.tls.secret.cert=$1/tls.crt,webhook.tls.secret.key=$1/tls.key"
}

# rendered NAME FILE NS: validate FILE's objects (NAME: what the rendering is).
rendered() {
	expect "$1: valid" "$check" validate -namespace "$3" "$2"
}

echo "helm $("$helm" version --short), chart $chart, kustomize base $deploy"

# The chart's copies of the Prometheus rule files (it cannot read outside its directory).
for f in alerts.yaml webhook-alerts.yaml; do
	if cmp -s "$chart/files/$f" "$deploy/prometheus/$f"; then
		pass "files/$f" "equal to deploy/prometheus/$f"
	else
		fail "files/$f" "differs from deploy/prometheus/$f: cp deploy/prometheus/$f $chart/files/$f"
	fi
done

# The chart's copies of the admission policies (deploy/admission-policy and its no-webhook/).
for f in pool-resources.yaml epc.yaml pinning.yaml core-sched.yaml no-webhook/request-annotations.yaml; do
	if cmp -s "$chart/files/admission-policy/${f#no-webhook/}" "$deploy/admission-policy/$f"; then
		pass "files/admission-policy/${f#no-webhook/}" "equal to deploy/admission-policy/$f"
	else
		fail "files/admission-policy/${f#no-webhook/}" "differs from deploy/admission-policy/$f: cp deploy/admission-policy/$f $chart/files/admission-policy/"
	fi
done

expect "lint (defaults)" "$helm" lint --strict --kube-version "$KUBE_VERSION" "$chart" -n podfence-system

# 1. Defaults against deploy/ as shipped (hack/certs.sh's component). The chart makes its own
# CA: both chains are verified, their bytes are not compared; Helm keeps its CA in a Secret
# of its own, and the namespace is created before `helm install`.
kustomize_copy "$tmp/base" podfence-system
render "$tmp/default.yaml" podfence-system
rendered "defaults" "$tmp/default.yaml" podfence-system
expect "defaults = kustomize deploy/" "$check" compare -generated-tls podfence-webhook-tls \
	-kustomize-only "Namespace podfence-system" -chart-only "Secret podfence-webhook-ca" "$tmp/base.yaml" "$tmp/default.yaml"

# 2. The same certificate files on both sides, and the Namespace: equal, byte for byte of
# every value.
# shellcheck disable=SC2046 # secret_tls's words are separate arguments
render "$tmp/secret.yaml" podfence-system --set namespace.create=true $(secret_tls "$tmp/base/certs")
rendered "TLS secret" "$tmp/secret.yaml" podfence-system
expect "namespace.create + TLS secret (hack/certs.sh) = kustomize deploy/" "$check" compare "$tmp/base.yaml" "$tmp/secret.yaml"

# 3. cert-manager and the extender, as deploy/'s components.
kustomize_copy "$tmp/cm" podfence-system 's/^  - certs$/  - cert-manager/' 's/^  # - extender$/  - extender/'
if ! grep -q '^  - cert-manager$' "$tmp/cm/kustomization.yaml" || ! grep -q '^  - extender$' "$tmp/cm/kustomization.yaml"; then
	die "deploy/kustomization.yaml: no lines '  - certs' and '  # - extender' to switch to cert-manager and extender"
fi
render "$tmp/cm-chart.yaml" podfence-system --set namespace.create=true --set webhook.tls.mode=cert-manager --set extender.enabled=true
rendered "cert-manager + extender" "$tmp/cm-chart.yaml" podfence-system
expect "cert-manager + extender = kustomize deploy/ (components cert-manager, extender)" "$check" compare "$tmp/cm.yaml" "$tmp/cm-chart.yaml"

# 3b. The agent privileged (cgroup v2 nodes with VM sandboxes), as deploy/'s component.
kustomize_copy "$tmp/priv" podfence-system 's/^  # - agent-privileged\(.*\)$/  - agent-privileged/'
grep -q '^  - agent-privileged$' "$tmp/priv/kustomization.yaml" ||
	die "deploy/kustomization.yaml: no line '  # - agent-privileged' to switch on the privileged agent"
# shellcheck disable=SC2046
render "$tmp/priv-chart.yaml" podfence-system --set namespace.create=true --set agent.privileged=true $(secret_tls "$tmp/priv/certs")
rendered "agent privileged" "$tmp/priv-chart.yaml" podfence-system
expect "agent.privileged = kustomize deploy/ (component agent-privileged)" "$check" compare "$tmp/priv.yaml" "$tmp/priv-chart.yaml"

# 3c. The agent with CAP_SYS_ADMIN (isolated cpuset partitions), as deploy/'s component.
kustomize_copy "$tmp/iso" podfence-system 's/^  # - agent-isolation\(.*\)$/  - agent-isolation/'
grep -q '^  - agent-isolation$' "$tmp/iso/kustomization.yaml" ||
	die "deploy/kustomization.yaml: no line '  # - agent-isolation' to switch on CAP_SYS_ADMIN for partitions"
# shellcheck disable=SC2046
render "$tmp/iso-chart.yaml" podfence-system --set namespace.create=true --set agent.isolationPartitions=true $(secret_tls "$tmp/iso/certs")
rendered "agent isolationPartitions" "$tmp/iso-chart.yaml" podfence-system
expect "agent.isolationPartitions = kustomize deploy/ (component agent-isolation)" "$check" compare "$tmp/iso.yaml" "$tmp/iso-chart.yaml"

# 4. Another namespace: every reference follows, as in deploy/ (deploy_namespace_test.go).
kustomize_copy "$tmp/moved" pf-moved
# shellcheck disable=SC2046
render "$tmp/moved-chart.yaml" pf-moved --set namespace.create=true $(secret_tls "$tmp/moved/certs")
rendered "namespace pf-moved" "$tmp/moved-chart.yaml" pf-moved
expect "-n pf-moved = kustomize deploy/ (namespace: pf-moved)" "$check" compare "$tmp/moved.yaml" "$tmp/moved-chart.yaml"
if grep -n 'podfence-system' "$tmp/moved-chart.yaml" >"$tmp/moved.grep"; then
	fail "-n pf-moved: no podfence-system" "$(head -n 3 "$tmp/moved.grep")"
else
	pass "-n pf-moved: no podfence-system" "not named in $(grep -c '^kind:' "$tmp/moved-chart.yaml") objects"
fi

# 5. The admission policies beside the webhook (the same certificate files: exactly equal),
# and without any webhook.
kustomize_copy "$tmp/vap" podfence-system 's/^  # - admission-policy$/  - admission-policy/'
grep -q '^  - admission-policy$' "$tmp/vap/kustomization.yaml" ||
	die "deploy/kustomization.yaml: no line '  # - admission-policy' to switch on the admission policies"
# shellcheck disable=SC2046
render "$tmp/vap-chart.yaml" podfence-system --set namespace.create=true --set admissionPolicy.enabled=true $(secret_tls "$tmp/vap/certs")
rendered "admission policies" "$tmp/vap-chart.yaml" podfence-system
expect "admissionPolicy.enabled = kustomize deploy/ (component admission-policy)" "$check" compare "$tmp/vap.yaml" "$tmp/vap-chart.yaml"
kustomize_copy "$tmp/nowebhook" podfence-system 's/^  # - admission-policy$/  - admission-policy\n  - admission-policy\/no-webhook/' '/^  - certs$/d'
render "$tmp/nowebhook-chart.yaml" podfence-system --set namespace.create=true --set admissionPolicy.enabled=true --set webhook.enabled=false
rendered "no webhook" "$tmp/nowebhook-chart.yaml" podfence-system
expect "admissionPolicy.enabled, webhook.enabled=false = kustomize deploy/ (admission-policy, admission-policy/no-webhook)" \
	"$check" compare "$tmp/nowebhook.yaml" "$tmp/nowebhook-chart.yaml"
if grep -qiE '^kind: (Mutating|Validating)WebhookConfiguration$|name: podfence-webhook$' "$tmp/nowebhook-chart.yaml"; then
	fail "webhook.enabled=false: no webhook objects" "$(grep -iE 'WebhookConfiguration$|name: podfence-webhook$' "$tmp/nowebhook-chart.yaml" | head -n 3 | tr '\n' ' ')"
else
	pass "webhook.enabled=false: no webhook objects" "$(grep -c '^kind: ValidatingAdmissionPolicy$' "$tmp/nowebhook-chart.yaml") policies, no webhook configuration, Deployment, Service or certificate"
fi

# 5b. The DRA driver beside the agent (Kubernetes 1.34+), as deploy/'s component.
kustomize_copy "$tmp/dra" podfence-system 's/^  # - dra\(.*\)$/  - dra/'
grep -q '^  - dra$' "$tmp/dra/kustomization.yaml" ||
	die "deploy/kustomization.yaml: no line '  # - dra' to switch on the DRA driver"
# shellcheck disable=SC2046
render "$tmp/dra-chart.yaml" podfence-system --set namespace.create=true --set dra.enabled=true \
	--kube-version "$DRA_KUBE_VERSION" $(secret_tls "$tmp/dra/certs") # the later --kube-version wins
rendered "DRA driver" "$tmp/dra-chart.yaml" podfence-system
expect "dra.enabled = kustomize deploy/ (component dra)" "$check" compare "$tmp/dra.yaml" "$tmp/dra-chart.yaml"

# 6. Other values: what each promises appears in the rendering.
cat >"$tmp/custom-values.yaml" <<'EOF'
resourceDomain: nokia.k8s.io
image: {repository: registry.example/podfence, tag: v9.9.9, pullPolicy: IfNotPresent}
coresched: {enabled: false, defaultGroup: pod, policy: best-effort, profiles: []}
epc: {policy: best-effort}
agent:
  nodeLabels: node-type=caas,zone=a
  metrics: {auth: none}
  extraArgs: [--log-level=debug]
webhook:
  tls: {ipAddresses: [127.0.0.1], extraDNSNames: [webhook.example]}
extender: {enabled: true}
prometheus: {rbac: {enabled: true}, rules: {enabled: true}}
admissionPolicy: {enabled: true, maxEPC: 64Gi}
EOF
# expect_lines NAME FILE LINE...: each LINE is a whole line of FILE (leading spaces aside).
expect_lines() {
	local name=$1 file=$2 missing=()
	shift 2
	for l in "$@"; do
		grep -qxF -- "$l" <(sed 's/^ *//' "$file") || missing+=("$l")
	done
	if ((${#missing[@]})); then
		fail "$name" "missing: $(printf '[%s] ' "${missing[@]}")"
	else
		pass "$name" "$# lines found"
	fi
}
render "$tmp/custom.yaml" pf-custom -f "$tmp/custom-values.yaml"
rendered "custom values" "$tmp/custom.yaml" pf-custom
expect_lines "custom values: agent flags" "$tmp/custom.yaml" \
	"- --resource-domain=nokia.k8s.io" "- --coresched=false" "- --coresched-default-group=pod" \
	"- --coresched-policy=best-effort" "- --epc-policy=best-effort" "- --metrics-address=127.0.0.1:9464" \
	"- --metrics-auth=none" "- --log-level=debug" 'node-type: "caas"' 'zone: "a"' \
	'httpGet: {"host":"127.0.0.1","path":"/healthz","port":9465,"scheme":"HTTP"}' "- --health-address=127.0.0.1:9465" \
	"image: registry.example/podfence:v9.9.9" "imagePullPolicy: IfNotPresent" \
	"- --default-group=pod" "coresched-profiles.yaml: |" "[]" 'maxEPC: "64Gi"'
alerts=$(cat "$deploy/prometheus/alerts.yaml" "$deploy/prometheus/webhook-alerts.yaml" | grep -c -- '- alert:')
got=$(grep -c -- '- alert:' "$tmp/custom.yaml" || true)
if grep -q '^kind: PrometheusRule$' "$tmp/custom.yaml" && grep -q '^  name: podfence-metrics-reader-prometheus$' "$tmp/custom.yaml" && ((got == alerts)); then
	pass "custom values: Prometheus objects" "PrometheusRule with all $alerts alerts of deploy/prometheus, ClusterRoleBinding podfence-metrics-reader-prometheus"
else
	fail "custom values: Prometheus objects" "PrometheusRule with $got alerts (want $alerts) or no ClusterRoleBinding podfence-metrics-reader-prometheus"
fi
render "$tmp/podmonitor.yaml" podfence-system --set prometheus.podMonitor.enabled=true
rendered "podMonitor" "$tmp/podmonitor.yaml" podfence-system
for values in "" "-f $tmp/custom-values.yaml" "--set webhook.tls.mode=cert-manager --set extender.enabled=true" \
	"--set admissionPolicy.enabled=true --set webhook.enabled=false"; do
	# shellcheck disable=SC2086 # values holds separate arguments
	expect "lint ${values:-(defaults)}" "$helm" lint --strict --kube-version "$KUBE_VERSION" "$chart" -n pf-lint $values
done
expect "lint --set dra.enabled=true" "$helm" lint --strict --kube-version "$DRA_KUBE_VERSION" "$chart" -n pf-lint \
	--set dra.enabled=true --set dra.extraArgs[0]=--epc-capacity=128Mi

# 7. Bad values are refused, naming the value.
# refused NAME ERE HELM ARGS...: helm template must fail with a message matching ERE.
refused() {
	local name=$1 ere=$2 out
	shift 2
	if out=$("$helm" template podfence "$chart" -n podfence-system --kube-version "$KUBE_VERSION" "$@" 2>&1); then
		fail "refused: $name" "rendered without error"
	elif grep -qE -- "$ere" <<<"$out"; then
		pass "refused: $name" "$(grep -E -- "$ere" <<<"$out" | head -n 1 | sed 's/^ *//')"
	else
		fail "refused: $name" "error without /$ere/: $out"
	fi
}
refused "resource domain" "resourceDomain.*podfence.io" --set resourceDomain=example.com
refused "TLS mode" "webhook/tls/mode" --set webhook.tls.mode=self-signed
refused "TLS secret without ca" "webhook.tls.secret.ca is empty" --set webhook.tls.mode=secret
refused "pool config name" "pools/configs/0/name.*poolconfig-" --set 'pools.configs[0].name=example.yaml' \
	--set-file "pools.configs[0].config=$deploy/pools/poolconfig-example.yaml"
refused "EPC policy" "epc/policy" --set epc.policy=lax
refused "podMonitor without metrics auth" "prometheus.podMonitor needs agent.metrics.auth kubernetes" \
	--set prometheus.podMonitor.enabled=true --set agent.metrics.auth=none
refused "Kubernetes before 1.30" "kubeVersion" --kube-version 1.29.0
refused "DRA before Kubernetes 1.34" "dra.enabled needs Kubernetes 1.34" --set dra.enabled=true
refused "health port = metrics port" "agent.metrics.healthPort 9464: the metrics port" --set agent.metrics.healthPort=9464
refused "admission policy maxEPC" "admissionPolicy/maxEPC" --set admissionPolicy.enabled=true --set admissionPolicy.maxEPC=64MB

echo "chart: $passed passed, $failed failed"
((failed == 0))
