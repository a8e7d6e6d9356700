package itest

import (
	"context"
	"fmt"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	v1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
	provreqclient "k8s.io/autoscaler/cluster-autoscaler/provreq/client"
	"k8s.io/autoscaler/cluster-autoscaler/provreq/crd"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// ProvreqEnv is a test namespace with the CRD installed and a typed client.
type ProvreqEnv struct {
	*framework.Env
	PRs *provreqclient.ProvisioningRequests
}

// NewProvreqEnv is framework.New with the ProvisioningRequest CRD installed and a client for it.
func NewProvreqEnv(t testing.TB) *ProvreqEnv {
	e := framework.New(t)
	if err := crd.Install(e.Context(), e.Config); err != nil {
		t.Fatal(err)
	}
	c, err := provreqclient.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &ProvreqEnv{Env: e, PRs: c.ProvisioningRequests(e.Namespace)}
}

// PodSet is one PodSet of a request: count pods of cpu, pinned by selector.
type PodSet struct {
	Name     string
	Count    int32
	CPU      string
	Selector map[string]string
}

// Template creates the PodTemplate Kueue would: ppt-<request>-<podset>.
func (e *ProvreqEnv) Template(request string, ps PodSet) string {
	e.T.Helper()
	name := fmt.Sprintf("ppt-%s-%s", request, ps.Name)
	pt := &apiv1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace},
		Template: apiv1.PodTemplateSpec{Spec: apiv1.PodSpec{NodeSelector: ps.Selector,
			Containers: []apiv1.Container{{Name: "main", Image: "busybox", Resources: apiv1.ResourceRequirements{
				Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse(ps.CPU),
					apiv1.ResourceMemory: resource.MustParse("100Mi")}}}}}}}
	if _, err := e.Client.CoreV1().PodTemplates(e.Namespace).Create(e.Context(), pt, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
	return name
}

// Request creates the request's templates (unless skipTemplates) and then the request.
func (e *ProvreqEnv) Request(name, class string, params map[string]string, skipTemplates bool, sets ...PodSet) {
	e.T.Helper()
	pr := &v1.ProvisioningRequest{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace},
		Spec: v1.ProvisioningRequestSpec{ProvisioningClassName: class, Parameters: map[string]v1.Parameter{}}}
	for k, v := range params {
		pr.Spec.Parameters[k] = v1.Parameter(v)
	}
	for _, ps := range sets {
		tmpl := fmt.Sprintf("ppt-%s-%s", name, ps.Name)
		if !skipTemplates {
			tmpl = e.Template(name, ps)
		}
		pr.Spec.PodSets = append(pr.Spec.PodSets, v1.PodSet{PodTemplateRef: v1.Reference{Name: tmpl}, Count: ps.Count})
	}
	if _, err := e.PRs.Create(e.Context(), pr, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

// Condition waits until the request has condition typ with status and reason.
func (e *ProvreqEnv) Condition(name, typ string, status metav1.ConditionStatus, reason string, timeout time.Duration) *v1.ProvisioningRequest {
	e.T.Helper()
	var got *v1.ProvisioningRequest
	e.Eventually(timeout, fmt.Sprintf("%s %s=%s (%s)", name, typ, status, reason), func(ctx context.Context) (bool, error) {
		pr, err := e.PRs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = pr
		c := provreq.FindCondition(pr.Status.Conditions, typ)
		return c != nil && c.Status == status && (reason == "" || c.Reason == reason), nil
	})
	return got
}

// DumpRequests logs every request's conditions when the test fails.
func (e *ProvreqEnv) DumpRequests() {
	e.T.Cleanup(func() {
		if !e.T.Failed() {
			return
		}
		list, err := e.PRs.List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return
		}
		for _, pr := range list.Items {
			for _, c := range pr.Status.Conditions {
				e.T.Logf("request %s: %s=%s %s: %s", pr.Name, c.Type, c.Status, c.Reason, c.Message)
			}
			e.T.Logf("request %s details: %v", pr.Name, pr.Status.ProvisioningClassDetails)
		}
	})
}

// Consumers creates n pods consuming request, as Kueue's pods would.
func (e *ProvreqEnv) Consumers(request string, n int, cpu string, selector map[string]string) {
	e.T.Helper()
	for i := 0; i < n; i++ {
		b := framework.MakePod(e.Namespace, fmt.Sprintf("%s-worker-%d", request, i)).Req(cpu, "100Mi")
		for k, v := range selector {
			b.NodeSelector(k, v)
		}
		pod := b.Obj()
		pod.Annotations = map[string]string{provreq.ConsumeAnnotation: request,
			provreq.ClassAnnotation: provreq.ClassBestEffortAtomicScaleUp}
		if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(e.Context(), pod, metav1.CreateOptions{}); err != nil {
			e.T.Fatal(err)
		}
	}
}

// ProvreqArgs are ScaleUpArgs with ProvisioningRequests on and short back-offs, plus extra.
func ProvreqArgs(e *ProvreqEnv, configPath string, extra ...string) []string {
	return ScaleUpArgs(e.Env, configPath, append([]string{"--enable-provisioning-requests",
		"--provisioning-request-initial-backoff-time=2s", "--provisioning-request-max-backoff-time=4s",
		"--provisioning-request-pod-template-grace-period=4s", "--expander=priority"}, extra...)...)
}
