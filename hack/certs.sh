#!/usr/bin/env bash
# Generates the admission webhook's TLS material with openssl: a CA and a serving certificate
# for the webhook Service's DNS names, signed by it. The API server verifies the webhook with
# the CA (the caBundle of the webhook configurations); the webhook serves tls.crt/tls.key.
# (cert-manager can do all of this in the cluster instead, and renew it: deploy/cert-manager.)
#
#   hack/certs.sh                      # writes deploy/certs/{ca.crt,ca.key,tls.crt,tls.key} and
#                                      # deploy/certs/kustomization.yaml (the component "certs")
#   kubectl apply -k deploy            # the component puts them into the Secret and the
#                                      # caBundle of both webhook configurations
#
# The serving certificate is valid 365 days (--days), the CA 10 years. Nothing renews it: run
# this again and apply before it expires (the webhook picks the new one up without a restart;
# `openssl x509 -enddate -noout -in deploy/certs/tls.crt` says when). The CA's key stays in
# DIR (ca.key, 0600): whoever reads it can make certificates the API server trusts for the
# webhook. Keep DIR safe, or delete ca.key and renew with --new-ca (the caBundle changes with
# the next apply).
#
# Without kustomize: `hack/certs.sh --apply` also creates/updates the Secret
# <namespace>/podfence-webhook-tls and patches the caBundle of every entry of the live
# MutatingWebhookConfiguration and ValidatingWebhookConfiguration named podfence.
#
# Options:
#   -o, --out DIR        output directory (default: deploy/certs beside this script)
#   -n, --namespace NS   the Service's namespace (default: the namespace: of the kustomization
#                        DIR is in, DIR/../kustomization.yaml, else of deploy/kustomization.yaml)
#   -s, --service NAME   the Service's name (default podfence-webhook)
#       --san SAN        one more subjectAltName, DNS:<name> or IP:<address> (repeatable),
#                        e.g. --san IP:127.0.0.1 for a webhook called by url
#       --days N         validity of the serving certificate (default 365; the CA: 10 years)
#       --new-ca         make a new CA even if DIR has one (the caBundle changes: apply again)
#       --apply          also update the Secret and the live caBundles (kubectl; $KUBECTL)
#       --config NAME    webhook configuration name for --apply (default podfence)
#
# An existing CA in DIR is reused, so running this again to renew the serving certificate
# keeps the caBundle the API server trusts. The webhook reloads a changed certificate
# without a restart. Keys are written 0600; DIR is meant to stay out of git
# (deploy/.gitignore lists certs/).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=$here/../deploy/certs
ns=
svc=podfence-webhook
days=365
new_ca=0
apply=0
config=podfence
sans=()
kubectl=${KUBECTL:-kubectl}

die() {
	echo "certs.sh: $*" >&2
	exit 1
}
usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

while (($#)); do
	case $1 in
	-o | --out) out=${2:?$1 needs a directory} && shift ;;
	-n | --namespace) ns=${2:?$1 needs a namespace} && shift ;;
	-s | --service) svc=${2:?$1 needs a name} && shift ;;
	--san) sans+=("${2:?--san needs DNS:<name> or IP:<address>}") && shift ;;
	--days) days=${2:?--days needs a number} && shift ;;
	--new-ca) new_ca=1 ;;
	--apply) apply=1 ;;
	--config) config=${2:?--config needs a name} && shift ;;
	-h | --help) usage ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
	shift
done
[[ $days =~ ^[1-9][0-9]*$ ]] || die "--days $days: want a positive number of days"
for s in ${sans[@]+"${sans[@]}"}; do
	[[ $s =~ ^(DNS:[A-Za-z0-9.*-]+|IP:[0-9a-fA-F.:]+)$ ]] || die "--san $s: want DNS:<name> or IP:<address>"
done
command -v openssl >/dev/null || die "openssl not found (apt-get install openssl)"

mkdir -p "$out"
out=$(cd "$out" && pwd)

# The namespace is written once, in the kustomization's namespace: field; the certificate's
# DNS names follow it.
kustomization_namespace() {
	[[ -f $1 ]] && sed -n -E "s/^namespace:[[:space:]]*[\"']?([a-z0-9.-]+).*/\1/p" "$1" | head -n 1
}
if [[ -z $ns ]]; then
	for k in "$out/../kustomization.yaml" "$here/../deploy/kustomization.yaml"; do
		ns=$(kustomization_namespace "$k") || true
		[[ -n $ns ]] && break
	done
	[[ -n $ns ]] || die "no namespace: in $out/../kustomization.yaml or deploy/kustomization.yaml: give --namespace"
fi
[[ $ns =~ ^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$ ]] || die "namespace $ns: not a namespace name"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
umask 077

# The CA: reused when present, so that the caBundle stays valid across renewals.
if ((new_ca)) || [[ ! -s $out/ca.crt || ! -s $out/ca.key ]]; then
	openssl req -x509 -new -nodes -newkey rsa:2048 -sha256 -days 3650 \
		-keyout "$tmp/ca.key" -out "$tmp/ca.crt" -subj "/CN=podfence-webhook-ca" \
		-addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign" 2>"$tmp/openssl.log" ||
		{ cat "$tmp/openssl.log" >&2; die "openssl could not make the CA"; }
	mv "$tmp/ca.key" "$out/ca.key"
	mv "$tmp/ca.crt" "$out/ca.crt"
	echo "certs.sh: new CA $out/ca.crt" >&2
else
	echo "certs.sh: reusing the CA $out/ca.crt" >&2
fi

# The serving certificate: the names the API server may use for the Service, plus --san.
san="DNS:$svc,DNS:$svc.$ns,DNS:$svc.$ns.svc,DNS:$svc.$ns.svc.cluster.local"
for s in ${sans[@]+"${sans[@]}"}; do san+=",$s"; done
cat >"$tmp/ext.cnf" <<EOF
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = $san
EOF
if ! {
	openssl req -new -nodes -newkey rsa:2048 -sha256 -keyout "$tmp/tls.key" -out "$tmp/tls.csr" \
		-subj "/CN=$svc.$ns.svc" &&
		openssl x509 -req -in "$tmp/tls.csr" -CA "$out/ca.crt" -CAkey "$out/ca.key" -CAcreateserial \
			-CAserial "$tmp/ca.srl" -sha256 -days "$days" -extfile "$tmp/ext.cnf" -out "$tmp/tls.crt"
} 2>"$tmp/openssl.log"; then
	cat "$tmp/openssl.log" >&2
	die "openssl could not make the serving certificate"
fi
openssl verify -CAfile "$out/ca.crt" "$tmp/tls.crt" >/dev/null || die "the new certificate does not verify against $out/ca.crt"
# Key first, then the certificate: the webhook keeps the old pair until both files match.
mv "$tmp/tls.key" "$out/tls.key"
mv "$tmp/tls.crt" "$out/tls.crt"
chmod 0644 "$out/ca.crt" "$out/tls.crt"
echo "certs.sh: serving certificate $out/tls.crt for $san, valid $days days" \
	"(until $(openssl x509 -enddate -noout -in "$out/tls.crt" | cut -d= -f2)): run this again and apply before then" >&2

# The kustomize component that deploy/kustomization.yaml includes (components: [certs]): these
# files as the Secret, ca.crt as the caBundle. Written each time, so that it matches this script.
cat >"$tmp/kustomization.yaml" <<'EOF'
# Written by hack/certs.sh (again at each run; do not edit): the files beside it as the
# webhook's Secret podfence-webhook-tls, and ca.crt as the caBundle of both webhook
# configurations. deploy/kustomization.yaml includes it as components: [certs]; ca.key is not
# used (it stays here for the next renewal). The alternative: deploy/cert-manager.
apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
generatorOptions:
  disableNameSuffixHash: true # updated in place: the webhook re-reads it, no rollout
secretGenerator:
  - name: podfence-webhook-tls
    type: kubernetes.io/tls
    files: [tls.crt, tls.key, ca.crt]
# The webhook configurations' ${CA_BUNDLE} placeholders become the CA that signed the
# serving certificate (base64 PEM, as the Secret already holds it).
replacements:
  - source:
      kind: Secret
      name: podfence-webhook-tls
      fieldPath: data.ca\.crt
    targets:
      - select: {kind: MutatingWebhookConfiguration, name: podfence}
        fieldPaths: [webhooks.*.clientConfig.caBundle]
      - select: {kind: ValidatingWebhookConfiguration, name: podfence}
        fieldPaths: [webhooks.*.clientConfig.caBundle]
EOF
chmod 0644 "$tmp/kustomization.yaml"
mv "$tmp/kustomization.yaml" "$out/kustomization.yaml"

if ((apply)); then
	command -v "$kubectl" >/dev/null || die "--apply: $kubectl not found"
	bundle=$(base64 -w0 <"$out/ca.crt")
	"$kubectl" create secret tls "$svc-tls" -n "$ns" --cert "$out/tls.crt" --key "$out/tls.key" \
		--dry-run=client -o yaml | "$kubectl" apply -f - >&2
	for kind in mutatingwebhookconfiguration validatingwebhookconfiguration; do
		n=$("$kubectl" get "$kind" "$config" -o jsonpath='{range .webhooks[*]}x{end}') ||
			die "--apply: no $kind $config (apply deploy/webhook first)"
		patch="" i=0
		while ((i < ${#n})); do
			patch+="${patch:+,}{\"op\":\"add\",\"path\":\"/webhooks/$i/clientConfig/caBundle\",\"value\":\"$bundle\"}"
			i=$((i + 1))
		done
		"$kubectl" patch "$kind" "$config" --type=json -p "[$patch]" >&2
	done
fi
