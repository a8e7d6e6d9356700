package template

import (
	"fmt"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// Clone returns node number i of group as a fresh copy of info: named
// "template-<group>-<i>", with that name as its hostname label and
// providerID, and its pods renamed and re-identified to run on it.
func Clone(info *cloudprovider.NodeInfo, group string, i int) (*apiv1.Node, []*apiv1.Pod) {
	name := fmt.Sprintf("template-%s-%d", group, i)
	node := info.Node.DeepCopy()
	node.Name = name
	node.UID = types.UID(name)
	node.ResourceVersion = ""
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels[apiv1.LabelHostname] = name
	node.Labels[TemplateNodeLabel] = "true"
	node.Spec.ProviderID = "template://" + name
	pods := make([]*apiv1.Pod, 0, len(info.Pods))
	for _, p := range info.Pods {
		c := p.DeepCopy()
		c.Name = fmt.Sprintf("%s-%s", p.Name, name)
		c.UID = types.UID(fmt.Sprintf("%s-%s", p.UID, name))
		c.Spec.NodeName = name
		pods = append(pods, c)
	}
	return node, pods
}
