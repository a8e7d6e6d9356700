package itest

import (
	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// Deployment creates a Deployment of replicas pods (app=<name>, 1 CPU each) on nodes matching selector.
func Deployment(e *framework.Env, name string, replicas int32, selector map[string]string) {
	e.T.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: apiv1.PodSpec{
				NodeSelector: selector,
				Containers: []apiv1.Container{{Name: "c", Image: "fake", Resources: apiv1.ResourceRequirements{
					Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("1"),
						apiv1.ResourceMemory: resource.MustParse("1Gi")}}}}}}}}
	if _, err := e.Client.AppsV1().Deployments(e.Namespace).Create(e.Context(), d, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
}
