{{/*
cloudProvider: clusterapi. clusterAPIMode is "<workload>-<management>": where the autoscaled (workload)
cluster is, then where the management cluster (the one holding the Machines) is, each either "incluster"
(the cluster the pod runs in, through its service account) or "kubeconfig" (a kubeconfig file, usually from
clusterAPIKubeconfigSecret). single-kubeconfig: one kubeconfig is both.
*/}}

{{- define "cluster-autoscaler.capi.modes" -}}
{{- list "incluster-incluster" "incluster-kubeconfig" "kubeconfig-incluster" "kubeconfig-kubeconfig" "single-kubeconfig" | toJson -}}
{{- end -}}

{{/* The validated clusterAPIMode; an unknown one stops the render. */}}
{{- define "cluster-autoscaler.capi.mode" -}}
{{- $mode := toString (.Values.clusterAPIMode | default "incluster-incluster") -}}
{{- $modes := include "cluster-autoscaler.capi.modes" . | fromJsonArray -}}
{{- if not (has $mode $modes) -}}
{{- fail (printf "clusterAPIMode %q is not a Cluster API mode; use one of %s" $mode (join ", " $modes)) -}}
{{- end -}}
{{- $mode -}}
{{- end -}}

{{/* "true" when the pod reaches the workload cluster in-cluster: always, except with clusterapi in a mode
that names a kubeconfig for it. The workload cluster's RBAC (nodes, pods, Leases, ...) is rendered only then. */}}
{{- define "cluster-autoscaler.workloadInCluster" -}}
{{- if ne .Values.cloudProvider "clusterapi" -}}
true
{{- else if hasPrefix "incluster-" (include "cluster-autoscaler.capi.mode" .) -}}
true
{{- end -}}
{{- end -}}

{{/* "true" when cloudProvider is clusterapi and the management cluster is the one the pod runs in: only then
is the Cluster API RBAC rendered. */}}
{{- define "cluster-autoscaler.capi.managementInCluster" -}}
{{- if and (eq .Values.cloudProvider "clusterapi") (hasSuffix "-incluster" (include "cluster-autoscaler.capi.mode" .)) -}}
true
{{- end -}}
{{- end -}}

{{/* "true" when the mode reads the workload cluster's kubeconfig (--kubeconfig). */}}
{{- define "cluster-autoscaler.capi.workloadKubeconfig" -}}
{{- if has (include "cluster-autoscaler.capi.mode" .) (list "kubeconfig-incluster" "kubeconfig-kubeconfig" "single-kubeconfig") -}}
true
{{- end -}}
{{- end -}}

{{/* "true" when the mode reads the management cluster's kubeconfig (--cloud-config). */}}
{{- define "cluster-autoscaler.capi.managementKubeconfig" -}}
{{- if has (include "cluster-autoscaler.capi.mode" .) (list "incluster-kubeconfig" "kubeconfig-kubeconfig") -}}
true
{{- end -}}
{{- end -}}

{{/* A kubeconfig path value: absolute, a file below some directory (that directory is where the Secret is
mounted). Usage: include "cluster-autoscaler.capi.path" (list "clusterAPIWorkloadKubeconfigPath" .Values.clusterAPIWorkloadKubeconfigPath) */}}
{{- define "cluster-autoscaler.capi.path" -}}
{{- $name := index . 0 -}}
{{- $path := toString (index . 1 | default "") -}}
{{- if or (not (isAbs $path)) (hasSuffix "/" $path) (eq (dir $path) "/") -}}
{{- fail (printf "%s %q must be an absolute file path below a directory, e.g. /etc/kubernetes/value (the Secret is mounted at its directory)" $name $path) -}}
{{- end -}}
{{- $path -}}
{{- end -}}

{{/* The directory clusterAPIKubeconfigSecret is mounted at, or nothing: the directory of the workload
kubeconfig when the mode reads one, else that of the management kubeconfig. */}}
{{- define "cluster-autoscaler.capi.secretDir" -}}
{{- if and (eq .Values.cloudProvider "clusterapi") .Values.clusterAPIKubeconfigSecret -}}
{{- if include "cluster-autoscaler.capi.workloadKubeconfig" . -}}
{{- dir (include "cluster-autoscaler.capi.path" (list "clusterAPIWorkloadKubeconfigPath" .Values.clusterAPIWorkloadKubeconfigPath)) -}}
{{- else if include "cluster-autoscaler.capi.managementKubeconfig" . -}}
{{- dir (include "cluster-autoscaler.capi.path" (list "clusterAPICloudConfigPath" .Values.clusterAPICloudConfigPath)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* One auto-discovery key or value: not empty, no "," or "=" (they separate the spec's fields).
Usage: include "cluster-autoscaler.capi.discoveryWord" (list "autoDiscovery.namespace" $value) */}}
{{- define "cluster-autoscaler.capi.discoveryWord" -}}
{{- $name := index . 0 -}}
{{- $v := toString (index . 1) -}}
{{- if or (eq $v "") (contains "," $v) (contains "=" $v) -}}
{{- fail (printf "%s %q: must be non-empty and hold no ',' or '='" $name $v) -}}
{{- end -}}
{{- $v -}}
{{- end -}}

{{/* The --node-group-auto-discovery spec without its "clusterapi:" prefix, from autoDiscovery.namespace,
.clusterName (run through tpl, as upstream) and .labels (a list of maps, each {label: value}); empty when none
is set. */}}
{{- define "cluster-autoscaler.capi.discovery" -}}
{{- $root := . -}}
{{- $parts := list -}}
{{- with .Values.autoDiscovery -}}
{{- if .namespace -}}
{{- $parts = append $parts (printf "namespace=%s" (include "cluster-autoscaler.capi.discoveryWord" (list "autoDiscovery.namespace" .namespace))) -}}
{{- end -}}
{{- if .clusterName -}}
{{- $name := tpl (toString .clusterName) $root -}}
{{- $parts = append $parts (printf "clusterName=%s" (include "cluster-autoscaler.capi.discoveryWord" (list "autoDiscovery.clusterName" $name))) -}}
{{- end -}}
{{- if and .labels (not (kindIs "slice" .labels)) -}}
{{- fail "autoDiscovery.labels must be a list of maps, e.g. [{environment: production}]" -}}
{{- end -}}
{{- range $i, $entry := .labels -}}
{{- if or (not (kindIs "map" $entry)) (not $entry) -}}
{{- fail (printf "autoDiscovery.labels[%d] must be a map of label to value, e.g. {environment: production}" $i) -}}
{{- end -}}
{{- range $k, $v := $entry -}}
{{- $key := include "cluster-autoscaler.capi.discoveryWord" (list (printf "autoDiscovery.labels[%d] key" $i) $k) -}}
{{- $parts = append $parts (printf "%s=%s" $key (include "cluster-autoscaler.capi.discoveryWord" (list (printf "autoDiscovery.labels[%d].%s" $i $k) $v))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- join "," $parts -}}
{{- end -}}

{{/* The clusterapi arguments, as YAML list items (each on its own line, after a newline). */}}
{{- define "cluster-autoscaler.capi.args" -}}
{{- if include "cluster-autoscaler.capi.workloadKubeconfig" . }}
- {{ printf "--kubeconfig=%s" (include "cluster-autoscaler.capi.path" (list "clusterAPIWorkloadKubeconfigPath" .Values.clusterAPIWorkloadKubeconfigPath)) | quote }}
{{- end }}
{{- if include "cluster-autoscaler.capi.managementKubeconfig" . }}
- {{ printf "--cloud-config=%s" (include "cluster-autoscaler.capi.path" (list "clusterAPICloudConfigPath" .Values.clusterAPICloudConfigPath)) | quote }}
{{- end }}
{{- if eq (include "cluster-autoscaler.capi.mode" .) "kubeconfig-incluster" }}
{{- /* No --cloud-config: the management cluster is the in-cluster one, not --kubeconfig's. */}}
- "--clusterapi-cloud-config-authoritative"
{{- end }}
{{- with include "cluster-autoscaler.capi.discovery" . }}
- {{ printf "--node-group-auto-discovery=clusterapi:%s" . | quote }}
{{- end }}
{{- end -}}

{{/* --namespace: the release namespace, except when the workload cluster is reached through a kubeconfig:
then clusterAPIConfigMapsNamespace (a namespace of the workload cluster), by default kube-system in
kubeconfig-incluster (as upstream) and the release namespace's name otherwise. */}}
{{- define "cluster-autoscaler.namespaceArg" -}}
{{- if include "cluster-autoscaler.workloadInCluster" . -}}
{{ .Release.Namespace }}
{{- else if .Values.clusterAPIConfigMapsNamespace -}}
{{ .Values.clusterAPIConfigMapsNamespace }}
{{- else if eq (include "cluster-autoscaler.capi.mode" .) "kubeconfig-incluster" -}}
kube-system
{{- else -}}
{{ .Release.Namespace }}
{{- end -}}
{{- end -}}

{{/* Checks of the values that concern Cluster API and auto-discovery; fails with what is wrong. */}}
{{- define "cluster-autoscaler.capi.validate" -}}
{{- if eq .Values.cloudProvider "clusterapi" -}}
{{- $mode := include "cluster-autoscaler.capi.mode" . -}}
{{- if .Values.cloudConfigPath -}}
{{- fail "cloudConfigPath is not used with cloudProvider clusterapi: its --cloud-config is the management cluster's kubeconfig, clusterAPICloudConfigPath (with clusterAPIMode incluster-kubeconfig or kubeconfig-kubeconfig)" -}}
{{- end -}}
{{- if .Values.autoscalingGroups -}}
{{- fail "autoscalingGroups is not used with cloudProvider clusterapi: its node groups are the MachineDeployments, MachineSets and MachinePools with the min/max size annotations (select them with autoDiscovery)" -}}
{{- end -}}
{{- if and .Values.clusterAPIKubeconfigSecret (eq $mode "incluster-incluster") -}}
{{- fail "clusterAPIKubeconfigSecret is set, but clusterAPIMode incluster-incluster reads no kubeconfig: choose the mode that says which cluster the Secret's kubeconfig is for" -}}
{{- end -}}
{{- if and .Values.clusterAPIConfigMapsNamespace (hasPrefix "incluster-" $mode) -}}
{{- fail (printf "clusterAPIConfigMapsNamespace applies only when the workload cluster is reached through a kubeconfig (clusterAPIMode kubeconfig-* or single-kubeconfig); with %s --namespace is the release namespace" $mode) -}}
{{- end -}}
{{- with .Values.clusterAPIConfigMapsNamespace -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" (toString .)) -}}
{{- fail (printf "clusterAPIConfigMapsNamespace %q is not a namespace name" (toString .)) -}}
{{- end -}}
{{- end -}}
{{- $_ := include "cluster-autoscaler.capi.args" . -}}
{{- $_ = include "cluster-autoscaler.capi.secretDir" . -}}
{{- else -}}
{{- with .Values.autoDiscovery -}}
{{- if eq $.Values.cloudProvider "kwok" -}}
{{- if or .clusterName .namespace -}}
{{- fail "autoDiscovery.clusterName and autoDiscovery.namespace are used only with cloudProvider clusterapi; the kwok provider discovers its node groups by template label: use autoDiscovery.labels" -}}
{{- end -}}
{{- $_ := include "cluster-autoscaler.kwok.discovery" $ -}}
{{- else if eq $.Values.cloudProvider "aws" -}}
{{- if or .namespace .labels -}}
{{- fail "autoDiscovery.namespace and autoDiscovery.labels are used only with cloudProvider clusterapi (and labels with kwok); the aws provider discovers Auto Scaling groups by autoDiscovery.clusterName and autoDiscovery.tags" -}}
{{- end -}}
{{- else if or .clusterName .namespace .labels -}}
{{- fail (printf "autoDiscovery is used only with cloudProvider clusterapi, kwok and aws; the %s provider has no node-group auto-discovery: list node groups in autoscalingGroups or in the provider's configuration" $.Values.cloudProvider) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The ClusterRole rules of the Cluster API provider, in the management cluster. The API group follows
extraEnv.CAPI_GROUP. Upstream's chart grants get/list/watch/update of machinedeployments, machinesets,
machinepools and machines, and get/update/patch of machinedeployments/scale and machinepools/scale; all
of it is granted here too, though this provider writes no node group object (sizes go through the
scale subresource, read and then updated) and only patches Machines. */}}
{{- define "cluster-autoscaler.capi.rules" -}}
{{- $group := (.Values.extraEnv | default dict).CAPI_GROUP | default "cluster.x-k8s.io" -}}
# Cluster API: the provider's informers over the node groups and their Machines (update is
# upstream's, unused).
- apiGroups: [{{ $group | quote }}]
  resources: [machinedeployments, machinesets, machinepools, machines]
  verbs: [get, list, watch, update]
# Ours: scale-down marks the Machine of the node to delete with the delete-machine annotation and
# its own cluster-autoscaler.kubernetes.io/machine-deletion mark, reading the Machine first (get;
# a merge patch; upstream's chart grants update instead).
- apiGroups: [{{ $group | quote }}]
  resources: [machines]
  verbs: [patch]
# Sizes change only through the scale subresource (read, then written back). Ours: machinesets/scale,
# for MachineSets that are node groups themselves (upstream grants it only in its Role).
- apiGroups: [{{ $group | quote }}]
  resources: [machinedeployments/scale, machinesets/scale, machinepools/scale]
  verbs: [get, update]
# Upstream's, unused: the scale subresource is read, then updated.
- apiGroups: [{{ $group | quote }}]
  resources: [machinedeployments/scale, machinepools/scale]
  verbs: [patch]
# Ours: infrastructure machine templates, each read by name for scale from zero (upstream's chart
# leaves them to rbac.additionalRules).
- apiGroups: [infrastructure.cluster.x-k8s.io]
  resources: ["*"]
  verbs: [get]
{{- end -}}

{{/* "true" when the chart renders its ClusterRole (and binding): some rule is needed in this cluster. */}}
{{- define "cluster-autoscaler.clusterRoleRendered" -}}
{{- if and .Values.rbac.create (or (include "cluster-autoscaler.workloadInCluster" .) (include "cluster-autoscaler.capi.managementInCluster" .) .Values.rbac.additionalRules) -}}
true
{{- end -}}
{{- end -}}

{{/* "true" when the chart renders its Role (and binding): the Lease and ConfigMaps of --namespace are in
this cluster, or rbac.clusterScoped is false and there are namespaced rules to hold. */}}
{{- define "cluster-autoscaler.roleRendered" -}}
{{- if and .Values.rbac.create (include "cluster-autoscaler.workloadInCluster" .) -}}
true
{{- else if and .Values.rbac.create (not (include "cluster-autoscaler.clusterScoped" .)) (or (include "cluster-autoscaler.capi.managementInCluster" .) .Values.rbac.additionalRules) -}}
{{- /* rbac.clusterScoped false: the Cluster API rules and rbac.additionalRules go into the Role. */ -}}
true
{{- end -}}
{{- end -}}


{{/* The kwok provider's --node-group-auto-discovery spec without its "kwok:" prefix: every label of
autoDiscovery.labels (a list of maps, each {label: value}), all of which a group's template must carry;
empty when none is set. */}}
{{- define "cluster-autoscaler.kwok.discovery" -}}
{{- $parts := list -}}
{{- with .Values.autoDiscovery -}}
{{- if and .labels (not (kindIs "slice" .labels)) -}}
{{- fail "autoDiscovery.labels must be a list of maps, e.g. [{environment: production}]" -}}
{{- end -}}
{{- range $i, $entry := .labels -}}
{{- if or (not (kindIs "map" $entry)) (not $entry) -}}
{{- fail (printf "autoDiscovery.labels[%d] must be a map of label to value, e.g. {environment: production}" $i) -}}
{{- end -}}
{{- range $k, $v := $entry -}}
{{- $key := include "cluster-autoscaler.capi.discoveryWord" (list (printf "autoDiscovery.labels[%d] key" $i) $k) -}}
{{- $parts = append $parts (printf "%s=%s" $key (include "cluster-autoscaler.capi.discoveryWord" (list (printf "autoDiscovery.labels[%d].%s" $i $k) $v))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- join "," $parts -}}
{{- end -}}
