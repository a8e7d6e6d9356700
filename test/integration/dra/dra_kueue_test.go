package dra

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	v1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// kueueManagedLabel is the label Kueue puts on the PodTemplates and
// ProvisioningRequests it creates.
const kueueManagedLabel = "kueue.x-k8s.io/managed"

// TestDRAKueueStyleJobWithClaims plays Kueue's provisioning admission
// check for a batch Job of 4 pods that each claim one GPU (a claim
// template), as the Kueue contract describes it: the PodTemplate
// ppt-<request>-<podset> first (limits copied into requests), then the
// request <workload>-<check>-1 with the managed label, its PodTemplate's
// controller moved to the request; once the request is Provisioned the
// Job is unsuspended with the consume and class annotations on its pod
// template. The GPU group (2 devices a node) gets exactly 2 nodes, the
// Job's pods run there, each with its own claim, to completion (kwok
// completes a Job's pods), and when the Job is done Kueue deletes the
// request and its PodTemplate; the autoscaler adds nothing for them.
func TestDRAKueueStyleJobWithClaims(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	itest.DumpPods(e.Env)
	gpu, plain, driver, path := itest.DraGroups(e.Env, 2)
	itest.CreateClaimTemplate(e.Env, "one-gpu", driver, 1)

	const request, podSet = "train-prov-1", "main"
	spec := itest.ClaimPodSpec("one-gpu")
	// Kueue copies limits into the requests that are missing.
	spec.Containers[0].Resources.Limits = apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("1"),
		apiv1.ResourceMemory: resource.MustParse("1Gi")}
	managed := map[string]string{kueueManagedLabel: "true"}
	pt := &apiv1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "ppt-" + request + "-" + podSet, Namespace: e.Namespace,
		Labels: managed}, Template: apiv1.PodTemplateSpec{Spec: spec}}
	pt, err := e.Client.CoreV1().PodTemplates(e.Namespace).Create(e.Context(), pt, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pr := &v1.ProvisioningRequest{ObjectMeta: metav1.ObjectMeta{Name: request, Namespace: e.Namespace, Labels: managed},
		Spec: v1.ProvisioningRequestSpec{ProvisioningClassName: provreq.ClassBestEffortAtomicScaleUp,
			PodSets: []v1.PodSet{{PodTemplateRef: v1.Reference{Name: pt.Name}, Count: 4}}}}
	if pr, err = e.PRs.Create(e.Context(), pr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pt.OwnerReferences = []metav1.OwnerReference{{APIVersion: "autoscaling.x-k8s.io/v1", Kind: "ProvisioningRequest",
		Name: pr.Name, UID: pr.UID, Controller: ptr.To(true)}}
	if _, err := e.Client.CoreV1().PodTemplates(e.Namespace).Update(e.Context(), pt, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	itest.StartAutoscaler(t, "autoscaler", itest.ProvreqArgs(e, path, "--expander=least-waste")...)
	e.Condition(request, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned, 120*time.Second)
	if got := itest.NodesPerPool(e.Env); got[gpu] != 2 || got[plain] != 0 {
		t.Errorf("nodes per group = %v, want %s:2 and no %s node", got, gpu, plain)
	}

	// Admitted: the Job runs with the check's podSetUpdates.
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: e.Namespace},
		Spec: batchv1.JobSpec{Parallelism: ptr.To(int32(4)), Completions: ptr.To(int32(4)),
			Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
				provreq.ConsumeAnnotation: request, provreq.ClassAnnotation: provreq.ClassBestEffortAtomicScaleUp}},
				Spec: *spec.DeepCopy()}}}
	job.Spec.Template.Spec.RestartPolicy = apiv1.RestartPolicyNever
	if _, err := e.Client.BatchV1().Jobs(e.Namespace).Create(e.Context(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// kwok runs a Job's pods to completion: the Job completes once its 4
	// pods were scheduled, which needs their claims allocated.
	e.Eventually(120*time.Second, "the Job's 4 pods Succeeded", func(ctx context.Context) (bool, error) {
		j, err := e.Client.BatchV1().Jobs(e.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
		return err == nil && j.Status.Succeeded == 4, err
	})
	pods, err := e.Client.CoreV1().Pods(e.Namespace).List(e.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		n, err := e.Client.CoreV1().Nodes().Get(e.Context(), p.Spec.NodeName, metav1.GetOptions{})
		if err != nil || n.Labels["pool"] != gpu || len(p.Status.ResourceClaimStatuses) != 1 {
			t.Errorf("pod %s ran on %q (err %v) with claims %v, want a node of %s and its own claim", p.Name, p.Spec.NodeName,
				err, p.Status.ResourceClaimStatuses, gpu)
		}
	}

	// The workload is done: Kueue deletes its requests (their PodTemplates
	// go with them, as Kueue owns them there).
	if err := e.Client.BatchV1().Jobs(e.Namespace).Delete(e.Context(), job.Name,
		metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	if err := e.PRs.Delete(e.Context(), request, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The request controls its PodTemplate: the garbage collector removes
	// it, and may already have done so by the time Kueue's own delete comes.
	if err := e.Client.CoreV1().PodTemplates(e.Namespace).Delete(e.Context(), pt.Name, metav1.DeleteOptions{}); err != nil &&
		!apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "the request and its PodTemplate gone", func(ctx context.Context) (bool, error) {
		list, err := e.PRs.List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 0 {
			return false, err
		}
		_, err = e.Client.CoreV1().PodTemplates(e.Namespace).Get(ctx, pt.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	// Several more loops (scan interval 1s): nothing is added for the
	// deleted request or the Job's leftover pods.
	time.Sleep(4 * time.Second)
	if got := itest.NodesPerPool(e.Env); got[gpu] > 2 || got[plain] != 0 {
		t.Errorf("nodes per group after the workload = %v, want no more than %s:2", got, gpu)
	}
}
