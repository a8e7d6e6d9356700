package itest

import (
	"fmt"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	v1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// ClaimPodSpec is a pod spec of one 1-CPU container with a claim "gpu"
// made from the ResourceClaimTemplate claimTemplate.
func ClaimPodSpec(claimTemplate string) apiv1.PodSpec {
	return apiv1.PodSpec{
		ResourceClaims: []apiv1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &claimTemplate}},
		Containers: []apiv1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
			Resources: apiv1.ResourceRequirements{
				Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("1"),
					apiv1.ResourceMemory: resource.MustParse("1Gi")},
				Claims: []apiv1.ResourceClaim{{Name: "gpu"}}}}}}
}

// CreateClaimTemplate creates a ResourceClaimTemplate asking for count
// devices of class.
func CreateClaimTemplate(e *framework.Env, name, class string, count int64) {
	e.T.Helper()
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: name},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}}}}}}
	if _, err := e.Client.ResourceV1().ResourceClaimTemplates(e.Namespace).Create(e.Context(), tmpl, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

// ClaimRequest creates a PodTemplate of claimPodSpec and a request of
// class for count pods of it.
func (e *ProvreqEnv) ClaimRequest(name, class, claimTemplate string, count int32) {
	e.T.Helper()
	ptName := "ppt-" + name + "-main"
	pt := &apiv1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: ptName, Namespace: e.Namespace},
		Template: apiv1.PodTemplateSpec{Spec: ClaimPodSpec(claimTemplate)}}
	if _, err := e.Client.CoreV1().PodTemplates(e.Namespace).Create(e.Context(), pt, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
	pr := &v1.ProvisioningRequest{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace},
		Spec: v1.ProvisioningRequestSpec{ProvisioningClassName: class,
			PodSets: []v1.PodSet{{PodTemplateRef: v1.Reference{Name: ptName}, Count: count}}}}
	if _, err := e.PRs.Create(e.Context(), pr, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

// CreateConsumers creates the n pods of an atomic request's job, as Kueue
// would once the request is Provisioned: <request>-worker-<i>, with the consume
// and class annotations and a claim of the template each.
func (e *ProvreqEnv) CreateConsumers(request, claimTemplate string, n int) {
	e.T.Helper()
	for i := 0; i < n; i++ {
		pod := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: fmt.Sprintf("%s-worker-%d", request, i),
			Annotations: map[string]string{provreq.ConsumeAnnotation: request,
				provreq.ClassAnnotation: provreq.ClassBestEffortAtomicScaleUp}},
			Spec: ClaimPodSpec(claimTemplate)}
		if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(e.Context(), pod, metav1.CreateOptions{}); err != nil {
			e.T.Fatal(err)
		}
	}
}

// ConditionMessage is the message of the request's condition typ.
func (e *ProvreqEnv) ConditionMessage(pr *v1.ProvisioningRequest, typ string) string {
	e.T.Helper()
	c := provreq.FindCondition(pr.Status.Conditions, typ)
	if c == nil {
		e.T.Fatalf("request %s has no %s condition", pr.Name, typ)
	}
	return c.Message
}
