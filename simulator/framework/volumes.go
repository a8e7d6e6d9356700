package framework

import (
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// csiManager gives the NodeVolumeLimits plugin the CSINode of a node as the
// simulation sees it: the CSINode the snapshot holds for a simulated node
// (a template clone, see Snapshot.SetCSINode), else the informer's object of
// the real node of that name. A node with neither has no CSINode: the plugin
// then enforces no attach limit on it, as the real scheduler does for a node
// whose CSINode has not been published yet.
type csiManager struct {
	lister storagelisters.CSINodeLister
	snap   *Snapshot
}

var (
	_ fwk.CSIManager    = (*csiManager)(nil)
	_ fwk.CSINodeLister = (*csiManager)(nil)
)

func (m *csiManager) CSINodes() fwk.CSINodeLister { return m }

// Get returns the CSINode of node name.
func (m *csiManager) Get(name string) (*storagev1.CSINode, error) {
	if c, ok := m.snap.csiNodes[name]; ok {
		return c, nil
	}
	if m.lister == nil {
		return nil, apierrors.NewNotFound(storagev1.Resource("csinodes"), name)
	}
	return m.lister.Get(name)
}

// List returns the CSINodes of the informer, with the snapshot's own in
// place of or in addition to them.
func (m *csiManager) List() ([]*storagev1.CSINode, error) {
	var out []*storagev1.CSINode
	if m.lister != nil {
		all, err := m.lister.List(labels.Everything())
		if err != nil {
			return nil, err
		}
		for _, c := range all {
			if _, own := m.snap.csiNodes[c.Name]; !own {
				out = append(out, c)
			}
		}
	}
	for _, c := range m.snap.csiNodes {
		out = append(out, c)
	}
	return out, nil
}

// SetCSINode gives the snapshot its own CSINode for node name (nil removes
// it): the volume attach limits the NodeVolumeLimits plugin enforces there.
// Real nodes need none, their CSINode comes from the informer. A template
// clone has no CSINode object in the cluster; its caller may register one
// under the name of the template node (the cloudprovider.NodeInfo's node)
// before cloning it: the estimator gives each clone a renamed copy, and twins
// made by CopyNode inherit their source's. Like every change, it is undone by
// Revert.
func (s *Snapshot) SetCSINode(name string, c *storagev1.CSINode) {
	old, had := s.csiNodes[name]
	if len(s.markers) > 0 {
		s.undo = append(s.undo, undoEntry{kind: undoCSINode, name: name, csi: old, hadCSI: had})
	}
	s.setCSI(name, c, c != nil)
}

// CSINode returns the CSINode the snapshot holds for name, if any.
func (s *Snapshot) CSINode(name string) (*storagev1.CSINode, bool) {
	c, ok := s.csiNodes[name]
	return c, ok
}

func (s *Snapshot) setCSI(name string, c *storagev1.CSINode, present bool) {
	if !present {
		delete(s.csiNodes, name)
		return
	}
	if s.csiNodes == nil {
		s.csiNodes = map[string]*storagev1.CSINode{}
	}
	s.csiNodes[name] = c
}

// RenamedCSINode returns a copy of c for node name.
func RenamedCSINode(c *storagev1.CSINode, name string) *storagev1.CSINode {
	cp := c.DeepCopy()
	cp.Name = name
	cp.UID = ""
	cp.ResourceVersion = ""
	cp.OwnerReferences = nil
	return cp
}
