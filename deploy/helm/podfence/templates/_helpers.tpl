{{/*
Labels every object carries besides its own name/component labels: deploy/'s
app.kubernetes.io/part-of and Helm's (hack/helm.sh ignores the latter when it compares).
*/}}
{{- define "podfence.labels" -}}
app.kubernetes.io/part-of: podfence
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/* The selector of one component's pods, as deploy/'s: name and component. */}}
{{- define "podfence.selector" -}}
app.kubernetes.io/name: podfence
app.kubernetes.io/component: {{ . }}
{{- end }}

{{/* An object's labels: its selector labels and podfence.labels. (dict "ctx" $ "component" c) */}}
{{- define "podfence.componentLabels" -}}
{{ include "podfence.selector" .component }}
{{ include "podfence.labels" .ctx }}
{{- end }}

{{/* Pod template labels: the selector and the release (Helm's; ignored in the comparison). */}}
{{- define "podfence.podLabels" -}}
{{ include "podfence.selector" .component }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- end }}

{{/* The podfence image. */}}
{{- define "podfence.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* imagePullPolicy, when set. */}}
{{- define "podfence.pullPolicy" -}}
{{- with .Values.image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- end }}

{{/* agent.nodeLabels as a map, for the DaemonSet's nodeSelector. */}}
{{- define "podfence.nodeSelector" -}}
{{- range $pair := splitList "," .Values.agent.nodeLabels }}
{{- $kv := splitn "=" 2 $pair }}
{{ $kv._0 }}: {{ $kv._1 | quote }}
{{- end }}
{{- end }}

{{/* A pool config or profile list: a string as given, anything else as YAML. */}}
{{- define "podfence.yamlContent" -}}
{{- if kindIs "string" . -}}
{{ . }}
{{- else -}}
{{ toYaml . }}
{{- end -}}
{{- end }}

{{/* The webhook's DNS names: the Service's, as hack/certs.sh and deploy/cert-manager give them. */}}
{{- define "podfence.webhookDNSNames" -}}
{{- $ns := .Release.Namespace -}}
{{- $names := list "podfence-webhook" (printf "podfence-webhook.%s" $ns) (printf "podfence-webhook.%s.svc" $ns) (printf "podfence-webhook.%s.svc.cluster.local" $ns) -}}
{{- toJson (concat $names .Values.webhook.tls.extraDNSNames) -}}
{{- end }}

{{/* The image pull secrets of a pod, when set. */}}
{{- define "podfence.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
The webhook's TLS as YAML: caBundle (base64 PEM, or empty with cert-manager), secret (the data
of Secret webhook.tls.secretName, when the chart writes it) and caSecret (mode helm: the CA
that later upgrades reuse). Called once per rendering (webhook-configurations.yaml).
*/}}
{{- define "podfence.webhookTLS" -}}
{{- $tls := .Values.webhook.tls -}}
{{- $ns := .Release.Namespace -}}
{{- if eq $tls.mode "helm" -}}
{{- $old := lookup "v1" "Secret" $ns "podfence-webhook-ca" -}}
{{- $oldData := dig "data" dict $old -}}
{{- $ca := dict -}}
{{- if and (index $oldData "tls.crt") (index $oldData "tls.key") -}}
{{- $ca = buildCustomCert (index $oldData "tls.crt") (index $oldData "tls.key") -}}
{{- else -}}
{{- $ca = genCA "podfence-webhook-ca" (int $tls.helm.caDays) -}}
{{- end -}}
{{- $dns := include "podfence.webhookDNSNames" . | fromJsonArray -}}
{{- $cert := genSignedCert (printf "podfence-webhook.%s.svc" $ns) $tls.ipAddresses $dns (int $tls.helm.days) $ca -}}
caBundle: {{ $ca.Cert | b64enc }}
secret:
  tls.crt: {{ $cert.Cert | b64enc }}
  tls.key: {{ $cert.Key | b64enc }}
  ca.crt: {{ $ca.Cert | b64enc }}
caSecret:
  tls.crt: {{ $ca.Cert | b64enc }}
  tls.key: {{ $ca.Key | b64enc }}
{{- else if eq $tls.mode "secret" -}}
{{- $s := $tls.secret -}}
{{- if not $s.ca -}}
{{- fail "webhook.tls.secret.ca is empty: mode secret needs the CA that signed the webhook's certificate (PEM; --set-file webhook.tls.secret.ca=deploy/certs/ca.crt)" -}}
{{- end -}}
{{- if ne (empty $s.cert) (empty $s.key) -}}
{{- fail "webhook.tls.secret: cert and key go together: give both (the chart writes the Secret) or neither (a Secret of yours, webhook.tls.secretName)" -}}
{{- end -}}
caBundle: {{ $s.ca | b64enc }}
{{- if $s.cert }}
secret:
  tls.crt: {{ $s.cert | b64enc }}
  tls.key: {{ $s.key | b64enc }}
  ca.crt: {{ $s.ca | b64enc }}
{{- end -}}
{{- else if ne $tls.mode "cert-manager" -}}
{{- fail (printf "webhook.tls.mode %q: want helm, secret or cert-manager" $tls.mode) -}}
{{- end -}}
{{- end }}

{{/* cert-manager's cainjector fills the caBundle of the webhook configurations. */}}
{{- define "podfence.injectCA" -}}
{{- if eq .Values.webhook.tls.mode "cert-manager" -}}
annotations:
  cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/podfence-webhook
{{- end -}}
{{- end }}

{{/* deploy/extender/scheduler-config.yaml: profile podfence-scheduler and the extender on the pod's loopback. */}}
{{- define "podfence.schedulerConfig" -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false # one replica, strategy Recreate
profiles:
  - schedulerName: podfence-scheduler
extenders:
  - urlPrefix: http://127.0.0.1:8888
    filterVerb: filter
    prioritizeVerb: prioritize
    weight: 1
    nodeCacheCapable: true
    ignorable: true
    httpTimeout: 5s
{{- end }}

{{- /* The Secret of the agents' metrics serving certificate: agent.metrics.tlsSecret, or with
     webhook.tls.mode cert-manager the chart's Certificate podfence-agent-metrics
     (deploy/cert-manager/agent-metrics.yaml); "" for a self-signed one made at start. */ -}}
{{- define "podfence.metricsTLSSecret" -}}
{{- $m := .Values.agent.metrics -}}
{{- if $m.tlsSecret -}}
{{ $m.tlsSecret }}
{{- else if and .Values.webhook.enabled (eq .Values.webhook.tls.mode "cert-manager") (eq $m.auth "kubernetes") -}}
podfence-agent-metrics-tls
{{- end -}}
{{- end }}
