package itest

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// KwokInstances lists the instances the kwok provider's state ConfigMap
// holds (those without a Node).
func KwokInstances(e *framework.Env) string {
	cm, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Get(e.Context(), "kwok-provider-state", metav1.GetOptions{})
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, v := range cm.Data {
		b.WriteString(v)
	}
	return b.String()
}

// NodeNames lists the names of the nodes of a pool, sorted.
func NodeNames(e *framework.Env, pool string) []string {
	e.T.Helper()
	list, err := e.Client.CoreV1().Nodes().List(e.Context(), metav1.ListOptions{LabelSelector: "pool=" + pool})
	if err != nil {
		e.T.Fatal(err)
	}
	var out []string
	for _, n := range list.Items {
		out = append(out, n.Name)
	}
	return out
}
