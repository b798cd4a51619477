# shellcheck shell=bash
# The Helm chart deploy/helm/podfence for the node e2e, beside or instead of kustomize
# (deploy-manifests.sh). Sourced; uses REPO (default: this checkout) and PFN_K8S_VERSION
# (lib.sh; default v1.37.2). helm comes from hack/helm.sh's cache (built once with go install).
#
# To apply the chart where deploy_manifests applies deploy/, with the certificate that
# hack/certs.sh made there (the webhook run.sh starts serves it):
#   helm_render "$RUN/helm.yaml" --set webhook.tls.mode=secret \
#     --set-file "webhook.tls.secret.ca=$RUN/deploy/certs/ca.crt,webhook.tls.secret.cert=$RUN/deploy/certs/tls.crt,webhook.tls.secret.key=$RUN/deploy/certs/tls.key"
#   helm_compare "$RUN/deploy.yaml" "$RUN/helm.yaml"   # kc kustomize's output: equal, object by object
#   kc apply --dry-run=server -f "$RUN/helm.yaml"      # then as deploy-e2e.json: webhooks by url

# helm_render OUT_FILE [HELM ARGS...]: the chart's manifests, as `kubectl kustomize deploy`
# gives deploy/'s: in namespace podfence-system (or -n in ARGS), with the Namespace object
# (namespace.create=true), for Kubernetes $PFN_K8S_VERSION. ARGS are helm template's
# (--set, --set-file, -f, -n). Fails, printing helm's error, when the chart does not render.
helm_render() {
	local out=${1:?helm_render: want an output file} repo=${REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)} helm
	shift
	helm=$(bash "$repo/hack/helm.sh" --helm-path) || return 1
	"$helm" template podfence "$repo/deploy/helm/podfence" -n podfence-system \
		--kube-version "${PFN_K8S_VERSION:-v1.37.2}" --set namespace.create=true "$@" >"$out"
}

# helm_compare KUSTOMIZE_YAML HELM_YAML: the two renderings are equal object by object
# (hack/helmcheck compare; a difference is printed as the object and the field).
helm_compare() {
	local repo=${REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)}
	(cd "$repo" && go run ./hack/helmcheck compare "$@")
}

# helm_install_upgrade KUBECONFIG [HELM ARGS...]: on a cluster without podfence, `helm install`
# of the chart with its own certificate (webhook.tls.mode helm) into podfence-system (created
# and labelled first, as docs/install.md says), then `helm upgrade`: the upgrade must keep
# the CA (caBundle of every webhook entry and Secret podfence-webhook-ca, found through
# lookup) and issue a new serving certificate from it; then `helm uninstall` removes every
# object. PASS/FAIL lines through checks.sh's pass and fail. A function helm_after_install, if
# defined, runs after the install (with KUBECONFIG as its argument).
helm_install_upgrade() {
	local kcfg=${1:?helm_install_upgrade: want a kubeconfig} repo=${REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)}
	local helm ns=podfence-system out before after left
	shift
	helm=$(bash "$repo/hack/helm.sh" --helm-path) || return 1
	_hi_helm() { "$helm" --kubeconfig "$kcfg" -n "$ns" "$@"; }
	_hi_kubectl() { kubectl --kubeconfig "$kcfg" --request-timeout=30s "$@"; }
	# _hi_tls: the caBundles, the CA Secret's certificate and the serving certificate, one
	# line each, as the first 12 hex digits of their SHA-256.
	_hi_tls() {
		{
			_hi_kubectl get mutatingwebhookconfiguration,validatingwebhookconfiguration podfence -o jsonpath='{range .items[*]}{range .webhooks[*]}{.clientConfig.caBundle}{"\n"}{end}{end}' | sort -u
			_hi_kubectl -n "$ns" get secret podfence-webhook-ca -o jsonpath='{.data.tls\.crt}{"\n"}'
			_hi_kubectl -n "$ns" get secret podfence-webhook-tls -o jsonpath='{.data.tls\.crt}{"\n"}'
		} | while read -r l; do printf '%s\n' "$(printf '%s' "$l" | sha256sum | cut -c1-12)"; done
	}
	if ! { _hi_kubectl create namespace "$ns" && _hi_kubectl label namespace "$ns" pod-security.kubernetes.io/enforce=privileged \
		pod-security.kubernetes.io/warn=privileged; } >/dev/null; then
		fail "helm install" "could not create and label namespace $ns"
		return 1
	fi
	if ! out=$(_hi_helm install podfence "$repo/deploy/helm/podfence" "$@" 2>&1); then
		fail "helm install" "$(tr '\n' ' ' <<<"$out")"
		return 1
	fi
	pass "helm install" "$(_hi_helm get manifest podfence | grep -c '^kind:') objects, release $(_hi_helm list -o json | jq -r '.[0] | .name + " " + .status')"
	if declare -F helm_after_install >/dev/null; then helm_after_install "$kcfg"; fi
	before=$(_hi_tls)
	if ! out=$(_hi_helm upgrade podfence "$repo/deploy/helm/podfence" "$@" 2>&1); then
		fail "helm upgrade" "$(tr '\n' ' ' <<<"$out")"
		return 1
	fi
	after=$(_hi_tls)
	# Line 1: the one caBundle of every entry; 2: the CA; 3: the serving certificate.
	if [[ $(grep -c . <<<"$before") == 3 && $(head -n 2 <<<"$before") == "$(head -n 2 <<<"$after")" &&
		$(sed -n 3p <<<"$before") != "$(sed -n 3p <<<"$after")" && $(head -n 1 <<<"$after") == "$(sed -n 2p <<<"$after")" ]]; then
		pass "helm upgrade keeps the CA" "caBundle of every webhook entry = Secret podfence-webhook-ca, unchanged; serving certificate issued anew"
	else
		fail "helm upgrade keeps the CA" "sha256 of caBundle(s), CA, serving certificate before: $(tr '\n' ' ' <<<"$before")after: $(tr '\n' ' ' <<<"$after")"
	fi
	if ! out=$(_hi_helm uninstall podfence --wait 2>&1); then
		fail "helm uninstall" "$(tr '\n' ' ' <<<"$out")"
		return 1
	fi
	# What the cluster, not the chart, keeps in the namespace: kube-controller-manager's
	# configmap/kube-root-ca.crt and serviceaccount/default. The DaemonSet's and Deployment's
	# pods end after their owners are deleted: up to 60 s.
	_hi_left() {
		_hi_kubectl get clusterrole,clusterrolebinding,mutatingwebhookconfiguration,validatingwebhookconfiguration,validatingadmissionpolicy -o name | grep podfence
		_hi_kubectl -n "$ns" get all,configmap,secret,serviceaccount,poddisruptionbudget -o name 2>/dev/null |
			grep -vx -e 'configmap/kube-root-ca.crt' -e 'serviceaccount/default'
	}
	for _ in $(seq 60); do
		left=$(_hi_left || true)
		[[ -z $left || $left == *clusterrole* || $left == *webhookconfiguration* ]] && break
		sleep 1
	done
	if [[ -z $left ]]; then
		pass "helm uninstall" "no podfence object left"
	else
		fail "helm uninstall" "left: $(tr '\n' ' ' <<<"$left")"
	fi
	_hi_kubectl delete namespace "$ns" --wait=false >/dev/null
}
