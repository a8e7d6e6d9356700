{{/*
Values of upstream's chart that this chart does not act on. values.schema.json checks the types of every
upstream key; the checks here stop the render, naming the key, where a value would be silently ignored. A
key left at upstream's default is accepted (a copy of upstream's values file carries them all), because at
its default it changes nothing for the providers this build has. FAQ.md ("How do I install it with Helm?")
lists them.
*/}}

{{/* The providers this build has. */}}
{{- define "cluster-autoscaler.providers" -}}
{{- list "kwok" "externalgrpc" "clusterapi" "aws" | toJson -}}
{{- end -}}

{{/* Upstream's default of each cloud-provider key of upstream's chart for a provider this build does not have
(a list: the defaults of different versions). A key whose value differs stops the render. */}}
{{- define "cluster-autoscaler.foreignProviderDefaults" -}}
{{- dict
  "azureClientID" ""
  "azureClientSecret" ""
  "azureResourceGroup" ""
  "azureSubscriptionID" ""
  "azureTenantID" ""
  "azureClusterName" ""
  "azureNodeResourceGroup" ""
  "azureUserAssignedIdentityID" ""
  "azureVMType" (list "vmss" "AKS")
  "azureUseManagedIdentityExtension" false
  "azureUseWorkloadIdentityExtension" false
  "azureEnableForceDelete" false
  "azureEnableVMSSEtag" false
  "magnumClusterName" ""
  "magnumCABundlePath" "/etc/kubernetes/ca-bundle.crt"
  "civoApiUrl" "https://api.civo.com"
  "civoApiKey" ""
  "civoClusterID" ""
  "civoRegion" ""
  | toJson -}}
{{- end -}}

{{/* Stops the render on a value of upstream's chart that would be ignored here. */}}
{{- define "cluster-autoscaler.upstream.validate" -}}
{{- $v := .Values -}}
{{- $providers := include "cluster-autoscaler.providers" . | fromJsonArray -}}
{{- if not (has (toString $v.cloudProvider) $providers) -}}
{{- fail (printf "cloudProvider %q: that cloud provider is not in this build; it has %s" (toString $v.cloudProvider) (join ", " $providers)) -}}
{{- end -}}
{{- range $key, $default := include "cluster-autoscaler.foreignProviderDefaults" . | fromJson -}}
{{- if hasKey $v $key -}}
{{- $value := index $v $key -}}
{{- $defaults := ternary $default (list $default) (kindIs "slice" $default) -}}
{{- $ok := kindIs "invalid" $value -}}
{{- range $defaults -}}
{{- if eq (toJson $value) (toJson .) -}}{{- $ok = true -}}{{- end -}}
{{- end -}}
{{- if not $ok -}}
{{- fail (printf "%s: the cloud provider this value is for is not in this build (it has %s); remove it, or leave it at upstream's default %s" $key (join ", " $providers) (toJson (first $defaults))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $v.autoscalingGroupsnamePrefix -}}
{{- fail (printf "autoscalingGroupsnamePrefix: GCE's managed instance group discovery; the gce cloud provider is not in this build (it has %s)" (join ", " $providers)) -}}
{{- end -}}
{{- if and $v.secretKeyRefNameOverride (ne (toString $v.cloudProvider) "aws") -}}
{{- fail "secretKeyRefNameOverride: names the Secret of the aws, azure, civo and exoscale credentials; of those cloud providers this build has only aws (pass your own Secret's keys with extraEnvSecrets or envFromSecret)" -}}
{{- end -}}
{{- if and (eq (toString $v.cloudProvider) "aws") (or $v.awsAccessKeyID $v.awsSecretAccessKey) (not (and $v.awsAccessKeyID $v.awsSecretAccessKey)) -}}
{{- fail "awsAccessKeyID and awsSecretAccessKey go together: set both, or neither (and let the SDK's credential chain find IRSA, EKS Pod Identity or the instance profile)" -}}
{{- end -}}
{{- if and $v.kwokConfigMapName (ne (toString $v.kwokConfigMapName) "kwok-provider-config") (ne (toString $v.cloudProvider) "kwok") -}}
{{- fail (printf "kwokConfigMapName %q: only the kwok cloud provider reads another name (KWOK_PROVIDER_CONFIGMAP); the external gRPC example server reads kwok-provider-config" (toString $v.kwokConfigMapName)) -}}
{{- end -}}
{{- $roles := ($v.autoDiscovery | default dict).roles -}}
{{- if and $roles (ne (toJson $roles) (toJson (list "worker"))) -}}
{{- fail (printf "autoDiscovery.roles: Magnum's node group roles; the magnum cloud provider is not in this build (it has %s); remove it, or leave it at upstream's default [worker]" (join ", " $providers)) -}}
{{- end -}}
{{- if $v.kubeTargetVersionOverride -}}
{{- fail (printf "kubeTargetVersionOverride %q: this chart renders the same objects for every Kubernetes version (it has no version check to override); remove it" (toString $v.kubeTargetVersionOverride)) -}}
{{- end -}}
{{- with $v.rbac -}}
{{- if .pspEnabled -}}
{{- fail "rbac.pspEnabled: PodSecurityPolicy was removed in Kubernetes 1.25 and this chart renders none; use Pod Security Admission (the pod runs as non-root, read-only, without capabilities)" -}}
{{- end -}}
{{- end -}}
{{- with $v.extraVolumeSecrets -}}
{{- range $name, $vol := . -}}
{{- if not (kindIs "map" $vol) -}}
{{- fail (printf "extraVolumeSecrets.%s must be a map with mountPath (and optionally name and items)" $name) -}}
{{- end -}}
{{- if not $vol.mountPath -}}
{{- fail (printf "extraVolumeSecrets.%s.mountPath is required" $name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $name, $ref := $v.extraEnvConfigMaps -}}
{{- if not (and (kindIs "map" $ref) $ref.key) -}}
{{- fail (printf "extraEnvConfigMaps.%s needs key (and optionally name, by default the chart's full name)" $name) -}}
{{- end -}}
{{- end -}}
{{- range $name, $ref := $v.extraEnvSecrets -}}
{{- if not (and (kindIs "map" $ref) $ref.key) -}}
{{- fail (printf "extraEnvSecrets.%s needs key (and optionally name, by default the chart's full name)" $name) -}}
{{- end -}}
{{- end -}}
{{- if and $v.vpa $v.vpa.enabled -}}
{{- if not (has (toString ($v.vpa.updateMode | default "Auto")) (list "Off" "Initial" "Recreate" "InPlaceOrRecreate" "Auto")) -}}
{{- fail (printf "vpa.updateMode %q: use Off, Initial, Recreate, InPlaceOrRecreate or Auto" (toString $v.vpa.updateMode)) -}}
{{- end -}}
{{- end -}}
{{- include "cluster-autoscaler.rbacScope.validate" . -}}
{{- end -}}

{{/* rbac.clusterScoped false: only the Role is rendered. With clusterapi and the management cluster in
this cluster, the Cluster API rules go into the Role, so the provider must watch that namespace only. */}}
{{- define "cluster-autoscaler.rbacScope.validate" -}}
{{- if and .Values.rbac.create (not (include "cluster-autoscaler.clusterScoped" .)) (include "cluster-autoscaler.capi.managementInCluster" .) -}}
{{- $ns := toString ((.Values.autoDiscovery | default dict).namespace | default "") -}}
{{- if ne $ns .Release.Namespace -}}
{{- fail (printf "rbac.clusterScoped false puts the Cluster API rules in a Role of namespace %s, so the provider may read only that namespace: set autoDiscovery.namespace to %s (it is %q)" .Release.Namespace .Release.Namespace $ns) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* "true" unless rbac.clusterScoped is false (upstream's default is true). */}}
{{- define "cluster-autoscaler.clusterScoped" -}}
{{- $rbac := .Values.rbac | default dict -}}
{{- if or (not (hasKey $rbac "clusterScoped")) (kindIs "invalid" $rbac.clusterScoped) $rbac.clusterScoped -}}
true
{{- end -}}
{{- end -}}
