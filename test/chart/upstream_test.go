package chart_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/util/retry"

	framework "k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// upstreamValuesFile is upstream's values file (chart 9.59.1), every key at
// upstream's default; its cloudProvider is upstream's default, aws.
const upstreamValuesFile = "testdata/upstream-values.yaml"

// upstreamValues returns upstream's values file with cloudProvider set to
// provider, nothing else changed.
func upstreamValues(t *testing.T, provider string) string {
	t.Helper()
	b, err := os.ReadFile(upstreamValuesFile)
	if err != nil {
		t.Fatal(err)
	}
	const line = "\ncloudProvider: aws\n"
	if strings.Count(string(b), line) != 1 {
		t.Fatalf("%s: want one line %q", upstreamValuesFile, strings.TrimSpace(line))
	}
	return strings.Replace(string(b), line, "\ncloudProvider: "+provider+"\n", 1)
}

// TestUpstreamValuesFileIsAccepted renders the chart with upstream's values
// file, with cloudProvider set to each provider of this build that needs no
// other value, and applies every rendered object to the API server, which
// validates each (the Deployment, its selector against its pod labels, the
// PodDisruptionBudget, the Service, the RBAC). externalgrpc needs the
// server's address, which upstream's file cannot carry: the render stops
// and says so.
func TestUpstreamValuesFileIsAccepted(t *testing.T) {
	t.Run("externalgrpc", func(t *testing.T) {
		_, err := helmTemplate(t, release, namespace, upstreamValues(t, "externalgrpc"))
		if want := "cloudProvider externalgrpc needs externalGRPC.address"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err %v, want one containing %q", err, want)
		}
	})
	for _, provider := range []string{"kwok", "clusterapi", "aws"} {
		t.Run(provider, func(t *testing.T) {
			env := framework.New(t)
			rel := framework.UniqueName("ca")
			m := render(t, rel, env.Namespace, upstreamValues(t, provider))
			wantKinds := []string{"ClusterRole", "ClusterRoleBinding", "Deployment", "PodDisruptionBudget", "Role",
				"RoleBinding", "Service", "ServiceAccount"}
			if diff := cmp.Diff(wantKinds, m.kinds()); diff != "" {
				t.Errorf("rendered kinds (-want +got):\n%s", diff)
			}
			d, c := m.deployment(t)
			if c.Image != "registry.k8s.io/autoscaling/cluster-autoscaler:v1.35.0" {
				t.Errorf("image %q", c.Image)
			}
			if want := "--cloud-provider=" + provider; !slices.Contains(c.Args, want) {
				t.Errorf("args %q lack %s", c.Args, want)
			}
			if v, set := envOf(c, "AWS_REGION"); set {
				t.Errorf("AWS_REGION = %q: upstream's awsRegion default is empty, the SDK finds the region", v)
			}
			checkArgsParse(t, c.Args)
			wantSelector := map[string]string{"app.kubernetes.io/instance": rel, "app.kubernetes.io/name": provider + "-cluster-autoscaler"}
			if diff := cmp.Diff(wantSelector, d.Spec.Selector.MatchLabels); diff != "" {
				t.Errorf("selector (-want +got):\n%s", diff)
			}
			applyAll(t, env, m)
		})
	}
}

// TestUpstreamStyleReleaseUpgrades creates the Deployment as upstream's chart
// names and labels it (selector: instance, name and podLabels), then
// updates it to this chart's rendering: the API server refuses any change of
// a Deployment's selector, so the update succeeds only when the selectors are
// the same. A Deployment whose selector lacks the podLabels (this chart's
// selector before it followed upstream's) is refused, which shows the check
// can fail.
func TestUpstreamStyleReleaseUpgrades(t *testing.T) {
	env := framework.New(t)
	ctx := env.Context()
	for name, tc := range map[string]struct {
		values       string
		upstreamSel  func(rel string) map[string]string
		upstreamPods map[string]string // pod labels upstream adds besides the selector
	}{
		"podLabels": {
			values: "podLabels: {team: autoscaling, tier: control}\nadditionalLabels: {cost-center: platform}\n",
			upstreamSel: func(rel string) map[string]string {
				return map[string]string{"app.kubernetes.io/instance": rel, "app.kubernetes.io/name": "aws-cluster-autoscaler",
					"team": "autoscaling", "tier": "control"}
			},
			upstreamPods: map[string]string{"cost-center": "platform"},
		},
		"deployment.selector": {
			values: "deployment: {selector: {app: cluster-autoscaler}}\npodLabels: {app: cluster-autoscaler}\n",
			upstreamSel: func(string) map[string]string {
				return map[string]string{"app": "cluster-autoscaler"}
			},
		},
		"nameOverride": {
			values: "nameOverride: autoscaler\n",
			upstreamSel: func(rel string) map[string]string {
				return map[string]string{"app.kubernetes.io/instance": rel, "app.kubernetes.io/name": "autoscaler"}
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			rel := framework.UniqueName("ca")
			m := render(t, rel, env.Namespace, tc.values)
			ours, _ := m.deployment(t)
			sel := tc.upstreamSel(rel)
			if diff := cmp.Diff(sel, ours.Spec.Selector.MatchLabels); diff != "" {
				t.Errorf("selector (-upstream +ours):\n%s", diff)
			}
			// The Deployment as upstream's chart would have created it.
			podLabels := map[string]string{}
			for k, v := range sel {
				podLabels[k] = v
			}
			for k, v := range tc.upstreamPods {
				podLabels[k] = v
			}
			old := &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: ours.Name, Namespace: env.Namespace},
				Spec: appsv1.DeploymentSpec{
					Selector: &metav1.LabelSelector{MatchLabels: sel},
					Template: apiv1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
						Spec: apiv1.PodSpec{Containers: []apiv1.Container{{Name: "upstream",
							Image: "registry.k8s.io/autoscaling/cluster-autoscaler:v1.35.0"}}},
					},
				},
			}
			created, err := env.Client.AppsV1().Deployments(env.Namespace).Create(ctx, old, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// The pods of the old ReplicaSets carry the old labels; the new
			// template must keep every selector label.
			// The Deployment controller writes its status meanwhile: a
			// conflict is retried with the latest resourceVersion.
			ours.ResourceVersion = created.ResourceVersion
			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				_, err := env.Client.AppsV1().Deployments(env.Namespace).Update(ctx, ours, metav1.UpdateOptions{})
				if apierrors.IsConflict(err) {
					if cur, gerr := env.Client.AppsV1().Deployments(env.Namespace).Get(ctx, ours.Name, metav1.GetOptions{}); gerr == nil {
						ours.ResourceVersion = cur.ResourceVersion
					}
				}
				return err
			})
			if err != nil {
				t.Fatalf("updating upstream's Deployment to this chart's: %v", err)
			}
			for k, v := range podLabels {
				if ours.Spec.Template.Labels[k] != v {
					t.Errorf("pod label %s=%q, upstream's chart gives %q", k, ours.Spec.Template.Labels[k], v)
				}
			}
			// The control: a selector without the extra labels is refused.
			if len(sel) > 2 || sel["app"] != "" {
				// The Deployment controller writes its status meanwhile: a
				// conflict is retried, the refusal must be about the selector.
				err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
					cur, err := env.Client.AppsV1().Deployments(env.Namespace).Get(ctx, ours.Name, metav1.GetOptions{})
					if err != nil {
						return err
					}
					cur.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{
						"app.kubernetes.io/instance": rel, "app.kubernetes.io/name": "aws-cluster-autoscaler"}}
					maps := cur.Spec.Template.Labels
					maps["app.kubernetes.io/instance"], maps["app.kubernetes.io/name"] = rel, "aws-cluster-autoscaler"
					_, err = env.Client.AppsV1().Deployments(env.Namespace).Update(ctx, cur, metav1.UpdateOptions{})
					return err
				})
				if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "immutable") {
					t.Errorf("changing the selector: err %v, want Invalid (field is immutable)", err)
				}
			}
		})
	}
}

// TestUpstreamValuesFail: each value of upstream's chart this build would
// ignore stops the render with a message naming it.
func TestUpstreamValuesFail(t *testing.T) {
	for name, tc := range map[string]struct{ values, want string }{
		"gce provider":                  {"cloudProvider: gce\n", `cloudProvider "gce": that cloud provider is not in this build`},
		"azureClientID":                 {"azureClientID: id\n", "azureClientID: the cloud provider"},
		"azure managed id":              {"azureUseManagedIdentityExtension: true\n", "azureUseManagedIdentityExtension: the cloud provider"},
		"azureVMType":                   {"azureVMType: standard\n", "azureVMType: the cloud provider"},
		"magnumClusterName":             {"magnumClusterName: c1\n", "magnumClusterName: the cloud provider"},
		"magnumCABundlePath":            {"magnumCABundlePath: /etc/ca.crt\n", "magnumCABundlePath: the cloud provider"},
		"civoApiKey":                    {"civoApiKey: k\n", "civoApiKey: the cloud provider"},
		"gce name prefix":               {"autoscalingGroupsnamePrefix: [{name: ig, minSize: 0, maxSize: 3}]\n", "autoscalingGroupsnamePrefix: GCE's"},
		"secretKeyRef":                  {"cloudProvider: kwok\nsecretKeyRefNameOverride: creds\n", "secretKeyRefNameOverride: names the Secret of the aws, azure"},
		"kwokConfigMapName":             {"cloudProvider: clusterapi\nkwokConfigMapName: mine\n", `kwokConfigMapName "mine": only the kwok cloud provider reads another name`},
		"pspEnabled":                    {"rbac: {pspEnabled: true}\n", "rbac.pspEnabled: PodSecurityPolicy was removed"},
		"volume without path":           {"extraVolumeSecrets: {creds: {name: s}}\n", "extraVolumeSecrets/creds"},
		"env secret no key":             {"extraEnvSecrets: {TOKEN: {name: s}}\n", "extraEnvSecrets/TOKEN"},
		"vpa update mode":               {"vpa: {enabled: true, updateMode: Sometimes}\n", `vpa.updateMode "Sometimes"`},
		"numeric pod label":             {"podLabels: {version: 2}\n", "/podLabels/version"},
		"selector vs labels":            {"deployment: {selector: {app: a}}\npodLabels: {app: b}\n", "deployment.selector app=a does not match the pod label app=b"},
		"pdb unknown key":               {"podDisruptionBudget: {maxUnavailable: 1, unhealthyPodEvictionPolicy: x}\n", "unhealthyPodEvictionPolicy"},
		"pdb both":                      {"podDisruptionBudget: {minAvailable: 1}\n", "either minAvailable or maxUnavailable"},
		"scoped capi without namespace": {"cloudProvider: clusterapi\nrbac: {clusterScoped: false}\n", "rbac.clusterScoped false puts the Cluster API rules in a Role of namespace kube-system"},
		"service port":                  {"service: {servicePort: 0}\n", "/service/servicePort"},
		"image pull secret":             {"image: {pullSecrets: [{name: regcred}]}\n", "/image/pullSecrets/0"},
		"replicas not integer":          {"replicaCount: one\n", "/replicaCount"},
		"magnum roles":                  {"autoDiscovery: {roles: [master]}\n", "autoDiscovery.roles: Magnum's node group roles; the magnum cloud provider is not in this build"},
		"kubeTargetVersionOverride":     {"kubeTargetVersionOverride: v1.30.0\n", `kubeTargetVersionOverride "v1.30.0": this chart renders the same objects for every Kubernetes version`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := helmTemplate(t, release, namespace, tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestUpstreamFeatureValues renders upstream's values that act here, set away
// from their defaults, checks each in the rendered objects, and applies them.
func TestUpstreamFeatureValues(t *testing.T) {
	env := framework.New(t)
	rel := framework.UniqueName("ca")
	m := render(t, rel, env.Namespace, `
podLabels: {team: autoscaling}
extraVolumeSecrets:
  cloud-creds:
    mountPath: /etc/creds
  custom:
    name: my-secret
    mountPath: /etc/custom
    items:
      - {key: token, path: token.txt}
extraVolumes:
  - {name: scratch, emptyDir: {}}
extraVolumeMounts:
  - {name: scratch, mountPath: /scratch}
extraEnvSecrets:
  TOKEN: {key: token}
extraEnvConfigMaps:
  SETTING: {name: settings, key: setting}
rbac:
  annotations: {owner: platform}
podDisruptionBudget:
  maxUnavailable: null
  minAvailable: 1
  annotations: {note: keep-one}
service:
  annotations: {a: b}
`)
	d, c := m.deployment(t)
	fullname := rel + "-aws-cluster-autoscaler"
	if c.Name != "aws-cluster-autoscaler" {
		t.Errorf("container %q, want upstream's aws-cluster-autoscaler", c.Name)
	}
	mounts := map[string]apiv1.VolumeMount{}
	for _, vm := range c.VolumeMounts {
		mounts[vm.Name] = vm
	}
	wantMounts := map[string]apiv1.VolumeMount{
		"cloud-creds": {Name: "cloud-creds", MountPath: "/etc/creds", ReadOnly: true},
		"custom":      {Name: "custom", MountPath: "/etc/custom", ReadOnly: true},
		"scratch":     {Name: "scratch", MountPath: "/scratch"},
	}
	if diff := cmp.Diff(wantMounts, mounts); diff != "" {
		t.Errorf("volume mounts (-want +got):\n%s", diff)
	}
	vols := map[string]apiv1.VolumeSource{}
	for _, v := range d.Spec.Template.Spec.Volumes {
		vols[v.Name] = v.VolumeSource
	}
	wantVols := map[string]apiv1.VolumeSource{
		"cloud-creds": {Secret: &apiv1.SecretVolumeSource{SecretName: fullname}},
		"custom": {Secret: &apiv1.SecretVolumeSource{SecretName: "my-secret",
			Items: []apiv1.KeyToPath{{Key: "token", Path: "token.txt"}}}},
		"scratch": {EmptyDir: &apiv1.EmptyDirVolumeSource{}},
	}
	if diff := cmp.Diff(wantVols, vols); diff != "" {
		t.Errorf("volumes (-want +got):\n%s", diff)
	}
	env1 := map[string]*apiv1.EnvVarSource{}
	for _, e := range c.Env {
		env1[e.Name] = e.ValueFrom
	}
	if s := env1["TOKEN"]; s == nil || s.SecretKeyRef == nil || s.SecretKeyRef.Name != fullname || s.SecretKeyRef.Key != "token" {
		t.Errorf("TOKEN from %+v, want the Secret %s (upstream's default name), key token", s, fullname)
	}
	if s := env1["SETTING"]; s == nil || s.ConfigMapKeyRef == nil || s.ConfigMapKeyRef.Name != "settings" {
		t.Errorf("SETTING from %+v", s)
	}
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
		o := m.all(kind)
		if len(o) != 1 || o[0].GetAnnotations()["owner"] != "platform" {
			t.Errorf("%s: annotations %v, want owner=platform", kind, o)
		}
	}
	pdb := &policyv1.PodDisruptionBudget{}
	m.one(t, "PodDisruptionBudget", pdb)
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Spec.MaxUnavailable != nil ||
		pdb.Annotations["note"] != "keep-one" {
		t.Errorf("PodDisruptionBudget %+v %v", pdb.Spec, pdb.Annotations)
	}
	if diff := cmp.Diff(map[string]string{"app.kubernetes.io/instance": rel, "app.kubernetes.io/name": "aws-cluster-autoscaler"},
		pdb.Spec.Selector.MatchLabels); diff != "" {
		t.Errorf("PDB selector (-want +got):\n%s", diff)
	}
	applyAll(t, env, m)

	// PDB and Service selectors override, as upstream's.
	m = render(t, rel, env.Namespace, `
podLabels: {app: ca}
podDisruptionBudget: {selector: {app: ca}}
service: {selector: {app: ca}}
`)
	m.one(t, "PodDisruptionBudget", pdb)
	svc := &apiv1.Service{}
	m.one(t, "Service", svc)
	if diff := cmp.Diff(map[string]string{"app": "ca"}, pdb.Spec.Selector.MatchLabels); diff != "" {
		t.Errorf("PDB selector (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"app": "ca"}, svc.Spec.Selector); diff != "" {
		t.Errorf("Service selector (-want +got):\n%s", diff)
	}
}

// TestClusterScopedFalse: rbac.clusterScoped false renders no ClusterRole; with
// Cluster API in kubeconfig-incluster mode the Cluster API rules are in the
// Role of the release namespace, which the API server's authorizer then
// grants there and nowhere else.
func TestClusterScopedFalse(t *testing.T) {
	m := render(t, release, namespace, "rbac: {clusterScoped: false}\n")
	if got := m.all("ClusterRole"); len(got) != 0 || len(m.all("ClusterRoleBinding")) != 0 {
		t.Errorf("clusterScoped false rendered kinds %v", m.kinds())
	}
	r := &rbacv1.Role{}
	m.one(t, "Role", r)
	if !allows(r.Rules, permission{group: "coordination.k8s.io", resource: "leases", verb: "create"}) {
		t.Errorf("Role lost the Lease rules: %+v", r.Rules)
	}

	in := install(t, `
cloudProvider: clusterapi
clusterAPIMode: kubeconfig-incluster
clusterAPIKubeconfigSecret: workload-kubeconfig
autoDiscovery: {namespace: $NAMESPACE}
rbac: {clusterScoped: false}
`)
	if got := in.manifest.all("ClusterRole"); len(got) != 0 {
		t.Fatalf("clusterScoped false rendered kinds %v", in.manifest.kinds())
	}
	ns := in.env.Namespace
	first := capiPermissions("cluster.x-k8s.io")[0]
	in.env.Eventually(10*time.Second, "the RBAC authorizer sees the RoleBinding", func(context.Context) (bool, error) {
		return in.can(t, ns, first), nil
	})
	for _, p := range capiPermissions("cluster.x-k8s.io") {
		if !in.can(t, ns, p) {
			t.Errorf("%v in %s refused", p, ns)
		}
		if in.can(t, "default", p) || in.can(t, "", p) {
			t.Errorf("%v allowed outside %s", p, ns)
		}
	}
	for _, p := range slices.Concat(capiForbidden("cluster.x-k8s.io"), forbiddenPermissions(), workloadPermissions()) {
		if in.can(t, "", p) || in.can(t, ns, p) {
			t.Errorf("%v allowed", p)
		}
	}
}

// applyAll applies every rendered object with server-side apply, through the
// API server's discovery, and deletes the cluster-scoped ones at the end.
func applyAll(t *testing.T, env *framework.Env, m manifest) {
	t.Helper()
	ctx := env.Context()
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range m {
		gvk := o.GroupVersionKind()
		mapping, err := mapper.RESTMapping(schema.GroupKind{Group: gvk.Group, Kind: gvk.Kind}, gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk, o.GetName(), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if o.GetNamespace() != "" {
			ri = dyn.Resource(mapping.Resource).Namespace(o.GetNamespace())
		}
		if _, err := ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
			t.Errorf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
			continue
		}
		if o.GetNamespace() == "" {
			name := o.GetName()
			t.Cleanup(func() {
				cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := ri.Delete(cctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("deleting %s %s: %v", o.GetKind(), name, err)
				}
			})
		}
	}
}

// vpaCRD is a stand-in for the VerticalPodAutoscaler CRD (the VPA is not
// installed in tests): autoscaling.k8s.io/v1 with a schema of the fields the
// chart renders, so that a strict create rejects a field the real CRD does
// not have, a wrong type or an unknown update mode.
const vpaCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: verticalpodautoscalers.autoscaling.k8s.io
  # *.k8s.io groups need this annotation; the real CRD carries the same.
  annotations: {api-approved.kubernetes.io: "https://github.com/kubernetes/kubernetes/pull/63797"}
spec:
  group: autoscaling.k8s.io
  scope: Namespaced
  names: {plural: verticalpodautoscalers, singular: verticalpodautoscaler, kind: VerticalPodAutoscaler, shortNames: [vpa]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        required: [spec]
        properties:
          spec:
            type: object
            required: [targetRef]
            properties:
              targetRef:
                type: object
                required: [kind, name]
                properties:
                  apiVersion: {type: string}
                  kind: {type: string}
                  name: {type: string}
              recommenders:
                type: array
                items: {type: object, required: [name], properties: {name: {type: string}}}
              updatePolicy:
                type: object
                properties:
                  updateMode: {type: string, enum: ["Off", Initial, Recreate, InPlaceOrRecreate, Auto]}
                  minReplicas: {type: integer}
              resourcePolicy:
                type: object
                properties:
                  containerPolicies:
                    type: array
                    items:
                      type: object
                      properties:
                        containerName: {type: string}
                        mode: {type: string, enum: [Auto, "Off"]}
                        minAllowed: {type: object, additionalProperties: {x-kubernetes-int-or-string: true, anyOf: [{type: integer}, {type: string}]}}
                        maxAllowed: {type: object, additionalProperties: {x-kubernetes-int-or-string: true, anyOf: [{type: integer}, {type: string}]}}
                        controlledResources: {type: array, items: {type: string}}
                        controlledValues: {type: string, enum: [RequestsAndLimits, RequestsOnly]}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// TestVPA renders vpa as upstream's chart does, installs a stand-in of the
// VPA CRD and creates the VerticalPodAutoscaler with strict field validation.
func TestVPA(t *testing.T) {
	env := framework.New(t)
	ctx := env.Context()
	rel := framework.UniqueName("ca")
	m := render(t, rel, env.Namespace, `
vpa:
  enabled: true
  updateMode: Initial
  recommender: custom
  containerPolicy:
    minAllowed: {cpu: 20m, memory: 50Mi}
    maxAllowed: {memory: 1Gi}
    controlledValues: RequestsOnly
`)
	d, c := m.deployment(t)
	vpas := m.all("VerticalPodAutoscaler")
	if len(vpas) != 1 {
		t.Fatalf("want one VerticalPodAutoscaler, got kinds %v", m.kinds())
	}
	vpa := vpas[0]
	want := map[string]any{
		"targetRef":    map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": d.Name},
		"recommenders": []any{map[string]any{"name": "custom"}},
		"updatePolicy": map[string]any{"updateMode": "Initial"},
		"resourcePolicy": map[string]any{"containerPolicies": []any{map[string]any{
			"containerName":    c.Name,
			"minAllowed":       map[string]any{"cpu": "20m", "memory": "50Mi"},
			"maxAllowed":       map[string]any{"memory": "1Gi"},
			"controlledValues": "RequestsOnly",
		}}},
	}
	if diff := cmp.Diff(want, vpa.Object["spec"]); diff != "" {
		t.Errorf("VPA spec (-want +got):\n%s", diff)
	}
	if vpa.GetAPIVersion() != "autoscaling.k8s.io/v1" || vpa.GetName() != d.Name || vpa.GetNamespace() != env.Namespace {
		t.Errorf("VPA %s %s/%s", vpa.GetAPIVersion(), vpa.GetNamespace(), vpa.GetName())
	}
	if len(render(t, rel, env.Namespace, "").all("VerticalPodAutoscaler")) != 0 {
		t.Errorf("a VerticalPodAutoscaler is rendered by default")
	}

	crd := decode(t, []byte(vpaCRD))[0]
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	if _, err := crds.Apply(ctx, crd.GetName(), crd, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = crds.Delete(cctx, crd.GetName(), metav1.DeleteOptions{})
	})
	gvr := schema.GroupVersionResource{Group: "autoscaling.k8s.io", Version: "v1", Resource: "verticalpodautoscalers"}
	env.Eventually(30*time.Second, "the VPA CRD is served", func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(gvr).Namespace(env.Namespace).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	vpas[0].SetResourceVersion("")
	if _, err := dyn.Resource(gvr).Namespace(env.Namespace).Create(ctx, vpa,
		metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
		t.Errorf("creating the rendered VerticalPodAutoscaler: %v", err)
	}
	// The control: the stand-in rejects what the real CRD would.
	bad := vpa.DeepCopy()
	bad.SetName(vpa.GetName() + "-bad")
	if err := unstructured.SetNestedField(bad.Object, "Sometimes", "spec", "updatePolicy", "updateMode"); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(gvr).Namespace(env.Namespace).Create(ctx, bad,
		metav1.CreateOptions{FieldValidation: "Strict"}); !apierrors.IsInvalid(err) {
		t.Errorf("an unknown update mode: err %v, want Invalid", err)
	}
}

// TestKwokConfigMapName: with cloudProvider kwok, upstream's kwokConfigMapName
// names the rendered ConfigMap and reaches the provider as
// KWOK_PROVIDER_CONFIGMAP; at the default no variable is set.
func TestKwokConfigMapName(t *testing.T) {
	m := render(t, "ca", "kube-system", "cloudProvider: kwok\nkwokConfigMapName: my-kwok\nkwokProviderConfig: {nodeGroups: []}\n")
	var names []string
	for _, cm := range m.all("ConfigMap") {
		names = append(names, cm.GetName())
	}
	if !slices.Contains(names, "my-kwok") || slices.Contains(names, "kwok-provider-config") {
		t.Errorf("ConfigMaps %v, want my-kwok and no kwok-provider-config", names)
	}
	env := func(m manifest) map[string]string {
		_, c := m.deployment(t)
		out := map[string]string{}
		for _, e := range c.Env {
			out[e.Name] = e.Value
		}
		return out
	}
	if got := env(m)["KWOK_PROVIDER_CONFIGMAP"]; got != "my-kwok" {
		t.Errorf("KWOK_PROVIDER_CONFIGMAP = %q, want my-kwok", got)
	}
	if _, set := env(render(t, "ca", "kube-system", "cloudProvider: kwok\n"))["KWOK_PROVIDER_CONFIGMAP"]; set {
		t.Error("KWOK_PROVIDER_CONFIGMAP set at the default name")
	}
}
