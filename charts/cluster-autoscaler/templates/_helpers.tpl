{{/*
Short name: <cloudProvider>-cluster-autoscaler unless nameOverride is set.
*/}}
{{- define "cluster-autoscaler.name" -}}
{{- default (printf "%s-%s" .Values.cloudProvider .Chart.Name) .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Full name of the chart's objects: <release>-<name>, just <name> when the release is called that, or
fullnameOverride. As upstream's chart names them, so that an upgrade from it keeps every object.
*/}}
{{- define "cluster-autoscaler.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default (printf "%s-%s" .Values.cloudProvider .Chart.Name) .Values.nameOverride -}}
{{- if eq $name .Release.Name -}}
{{- $name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "cluster-autoscaler.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Labels that select the autoscaler's pods: instance and name, as upstream's chart.
*/}}
{{- define "cluster-autoscaler.selectorLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/name: {{ include "cluster-autoscaler.name" . | quote }}
{{- end -}}

{{/*
The Deployment's spec.selector.matchLabels, which cannot change once the Deployment exists: as
upstream's chart, deployment.selector when set, else the selector labels and podLabels.
*/}}
{{- define "cluster-autoscaler.deploymentSelector" -}}
{{- if .Values.deployment.selector -}}
{{- toYaml .Values.deployment.selector -}}
{{- else -}}
{{- $labels := include "cluster-autoscaler.selectorLabels" . | fromYaml -}}
{{- range $k, $v := .Values.podLabels -}}
{{- $_ := set $labels $k $v -}}
{{- end -}}
{{- toYaml $labels -}}
{{- end -}}
{{- end -}}

{{/*
The pod template's labels: the selector labels, additionalLabels and podLabels (as upstream's chart),
and the Deployment's selector, which must match them.
*/}}
{{- define "cluster-autoscaler.podLabels" -}}
{{- $labels := include "cluster-autoscaler.selectorLabels" . | fromYaml -}}
{{- range $k, $v := .Values.additionalLabels -}}
{{- $_ := set $labels $k $v -}}
{{- end -}}
{{- range $k, $v := .Values.podLabels -}}
{{- $_ := set $labels $k $v -}}
{{- end -}}
{{- range $k, $v := include "cluster-autoscaler.deploymentSelector" . | fromYaml -}}
{{- if and (hasKey $labels $k) (ne (toString (index $labels $k)) (toString $v)) -}}
{{- fail (printf "deployment.selector %s=%v does not match the pod label %s=%v (from podLabels or additionalLabels): the Deployment would select none of its pods" $k $v $k (index $labels $k)) -}}
{{- end -}}
{{- $_ := set $labels $k $v -}}
{{- end -}}
{{- toYaml $labels -}}
{{- end -}}

{{/*
Labels of every object.
*/}}
{{- define "cluster-autoscaler.labels" -}}
{{ include "cluster-autoscaler.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ include "cluster-autoscaler.chart" . | quote }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
The pod's service account: rbac.serviceAccount.name, else the full name when the chart creates it and
the namespace's default one when it does not (as upstream's chart).
*/}}
{{- define "cluster-autoscaler.serviceAccountName" -}}
{{- if .Values.rbac.serviceAccount.create -}}
{{- default (include "cluster-autoscaler.fullname" .) .Values.rbac.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.rbac.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Annotations of the RBAC objects (rbac.annotations), as a metadata block, or nothing. */}}
{{- define "cluster-autoscaler.rbacAnnotations" -}}
{{- with .Values.rbac.annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
The value of one flag from extraArgs (the key exactly as given), or the second argument.
Usage: include "cluster-autoscaler.flag" (list . "status-config-map-name" "cluster-autoscaler-status")
*/}}
{{- define "cluster-autoscaler.flag" -}}
{{- $root := index . 0 -}}
{{- $value := index ($root.Values.extraArgs | default dict) (index . 1) -}}
{{- if kindIs "invalid" $value -}}{{ index . 2 }}{{- else -}}{{ $value }}{{- end -}}
{{- end -}}

{{/*
Port of /metrics and /health-check: the port of extraArgs.address, 8085 by default.
*/}}
{{- define "cluster-autoscaler.port" -}}
{{- $address := include "cluster-autoscaler.flag" (list . "address" ":8085") -}}
{{- regexFind "[0-9]+$" $address | default "8085" -}}
{{- end -}}

{{- define "cluster-autoscaler.statusConfigMapName" -}}
{{- include "cluster-autoscaler.flag" (list . "status-config-map-name" "cluster-autoscaler-status") -}}
{{- end -}}

{{- define "cluster-autoscaler.leaseName" -}}
{{- include "cluster-autoscaler.flag" (list . "leader-elect-resource-name" "cluster-autoscaler") -}}
{{- end -}}

{{/*
"true" when the expander chain names the priority expander.
*/}}
{{- define "cluster-autoscaler.priorityExpander" -}}
{{- $expanders := splitList "," (include "cluster-autoscaler.flag" (list . "expander" "")) -}}
{{- if has "priority" $expanders -}}true{{- end -}}
{{- end -}}

{{/*
One command-line argument for flag name and value: --name=value, or --name alone for a null
value. Whole-number floats (how Helm reads every YAML number) are printed as integers, so that
1000000 does not become 1e+06.
*/}}
{{- define "cluster-autoscaler.arg" -}}
{{- $name := index . 0 -}}
{{- $value := index . 1 -}}
{{- if kindIs "invalid" $value -}}
--{{ $name }}
{{- else if and (kindIs "float64" $value) (eq $value (floor $value)) -}}
--{{ $name }}={{ int64 $value }}
{{- else -}}
--{{ $name }}={{ $value }}
{{- end -}}
{{- end -}}

{{/*
The container's arguments, one per line, as a YAML list.
*/}}
{{- define "cluster-autoscaler.args" -}}
- {{ printf "--cloud-provider=%s" .Values.cloudProvider | quote }}
- {{ printf "--namespace=%s" (include "cluster-autoscaler.namespaceArg" .) | quote }}
{{- if eq .Values.cloudProvider "clusterapi" }}
{{- include "cluster-autoscaler.capi.args" . }}
{{- else if .Values.cloudConfigPath }}
- {{ printf "--cloud-config=%s" .Values.cloudConfigPath | quote }}
{{- else if eq .Values.cloudProvider "externalgrpc" }}
- {{ printf "--cloud-config=%s/cloud-config.yaml" (include "cluster-autoscaler.externalGRPCConfigDir" .) | quote }}
{{- end }}
{{- if and (eq .Values.cloudProvider "aws") .Values.autoDiscovery.clusterName }}
{{- $tags := list }}
{{- range .Values.autoDiscovery.tags }}{{ $tags = append $tags (tpl (toString .) $) }}{{ end }}
{{- if $tags }}
- {{ printf "--node-group-auto-discovery=asg:tag=%s" (join "," $tags) | quote }}
{{- end }}
{{- end }}
{{- if eq .Values.cloudProvider "kwok" }}
{{- with include "cluster-autoscaler.kwok.discovery" . }}
- {{ printf "--node-group-auto-discovery=kwok:%s" . | quote }}
{{- end }}
{{- end }}
{{- range .Values.autoscalingGroups }}
{{- if or (kindIs "invalid" .minSize) (kindIs "invalid" .maxSize) (not .name) }}
{{- fail "each autoscalingGroups entry needs name, minSize and maxSize" }}
{{- end }}
- {{ printf "--nodes=%d:%d:%s" (int64 .minSize) (int64 .maxSize) .name | quote }}
{{- end }}
{{- range $key, $value := .Values.extraArgs }}
- {{ include "cluster-autoscaler.arg" (list (regexReplaceAll "_.*$" $key "") $value) | quote }}
{{- end }}
{{- range .Values.customArgs }}
- {{ . | quote }}
{{- end }}
{{- end -}}

{{/* Where the external gRPC provider's rendered --cloud-config and TLS files are mounted. */}}
{{- define "cluster-autoscaler.externalGRPCConfigDir" -}}
/etc/cluster-autoscaler/externalgrpc
{{- end -}}
{{- define "cluster-autoscaler.externalGRPCTLSDir" -}}
/etc/cluster-autoscaler/externalgrpc-tls
{{- end -}}

{{/* True (non-empty) when the chart renders and mounts the external gRPC provider's --cloud-config. */}}
{{- define "cluster-autoscaler.externalGRPCConfig" -}}
{{- if and (eq .Values.cloudProvider "externalgrpc") (not .Values.cloudConfigPath) }}true{{ end -}}
{{- end -}}

{{/* The example external gRPC server's name. */}}
{{- define "cluster-autoscaler.exampleServerName" -}}
{{- printf "%s-kwokserver" (include "cluster-autoscaler.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The external gRPC server's address: the value, or the example server's Service. */}}
{{- define "cluster-autoscaler.externalGRPCAddress" -}}
{{- if .Values.externalGRPC.address -}}
{{ .Values.externalGRPC.address }}
{{- else if .Values.externalGRPC.exampleServer.enabled -}}
{{ printf "%s.%s.svc:%d" (include "cluster-autoscaler.exampleServerName" .) .Release.Namespace (int .Values.externalGRPC.exampleServer.port) }}
{{- else -}}
{{ fail "cloudProvider externalgrpc needs externalGRPC.address (or externalGRPC.exampleServer.enabled, or cloudConfigPath)" }}
{{- end -}}
{{- end -}}

{{/*
The shipped alert group (files/alerts.yaml) as one item of a PrometheusRule's
groups: prometheusAlerts.disabled left out, prometheusAlerts.labels added.
*/}}
{{- define "cluster-autoscaler.alertsGroup" -}}
{{- $cfg := .Values.prometheusAlerts -}}
{{- if not (kindIs "slice" ($cfg.disabled | default list)) -}}
{{- fail "prometheusAlerts.disabled must be a list of alert names" -}}
{{- end -}}
{{- if not (kindIs "map" ($cfg.labels | default dict)) -}}
{{- fail "prometheusAlerts.labels must be a map of labels" -}}
{{- end -}}
{{- range $k, $v := ($cfg.labels | default dict) -}}
{{- if not (kindIs "string" $v) -}}
{{- fail (printf "prometheusAlerts.labels.%s must be a string (quote it), not %v" $k $v) -}}
{{- end -}}
{{- end -}}
{{- $file := .Files.Get "files/alerts.yaml" | fromYaml -}}
{{- $group := index $file.groups 0 -}}
{{- $known := list -}}
{{- range $group.rules }}{{ $known = append $known .alert }}{{ end -}}
{{- range ($cfg.disabled | default list) -}}
{{- if not (has . $known) -}}
{{- fail (printf "prometheusAlerts.disabled: %v is not a shipped alert; they are %s" . (join ", " $known)) -}}
{{- end -}}
{{- end -}}
{{- $rules := list -}}
{{- range $group.rules -}}
{{- if not (has .alert ($cfg.disabled | default list)) -}}
{{- $rule := deepCopy . -}}
{{- if $cfg.labels -}}
{{- $_ := set $rule "labels" (merge (deepCopy ($cfg.labels | default dict)) ($rule.labels | default dict)) -}}
{{- end -}}
{{- $rules = append $rules $rule -}}
{{- end -}}
{{- end -}}
- name: {{ printf "%s-alerts" (include "cluster-autoscaler.fullname" .) }}
  {{- with .Values.prometheusRule.interval }}
  interval: {{ . }}
  {{- end }}
  rules:
    {{- toYaml $rules | nindent 4 }}
{{- end -}}

{{/* The Secret holding the AWS access key: secretKeyRefNameOverride, else the chart's own (rendered from
awsAccessKeyID and awsSecretAccessKey). Empty: no key; the SDK's credential chain finds one. */}}
{{- define "cluster-autoscaler.awsSecret" -}}
{{- if eq (toString .Values.cloudProvider) "aws" -}}
{{- if .Values.secretKeyRefNameOverride -}}
{{ .Values.secretKeyRefNameOverride }}
{{- else if .Values.awsAccessKeyID -}}
{{ include "cluster-autoscaler.fullname" . }}-aws
{{- end -}}
{{- end -}}
{{- end -}}
