package framework

import (
	"context"
	"reflect"
	"unsafe"

	apiv1 "k8s.io/api/core/v1"
)

// CheckMemo lends the PreFilter result of a pod to the pods interchangeable
// with it (see interchangeable), so that a simulation moving many pods of the
// same workloads (a scale-down simulation drains every candidate) runs the
// PreFilter plugins once per workload instead of once per pod: their state
// and statuses were most of what the drain of 2,000 nodes allocated.
//
// Only pods whose check is pod-local (PodByPodReason empty: no inter-pod
// terms, no spread constraints, no volume or claim the plugins look at, only
// pod-local plugins in the profile) are lent a result. Their PreFilter
// result depends on the pod and on one part of the snapshot only: the nodes
// running pods with inter-pod terms (InterPodAffinity counts the existing
// pods' anti-affinity terms the pod matches). The memo forgets every result
// when that part may have changed (Snapshot.interPodGen), Resets included.
type CheckMemo struct {
	h   *Handle
	gen uint64
	// checks holds the remembered checks by the addresses of their pod's
	// containers array and labels, which the pods of one workload share in
	// the informers' cache (informercache; the containers alone are shared
	// by every workload whose pods ask the same); interchangeable decides.
	checks map[memoKey][]*PodCheck
}

type memoKey struct{ containers, labels unsafe.Pointer }

func memoKeyOf(pod *apiv1.Pod) memoKey {
	return memoKey{containers: unsafe.Pointer(unsafe.SliceData(pod.Spec.Containers)),
		labels: reflect.ValueOf(pod.Labels).UnsafePointer()}
}

// maxChecksPerKey bounds the checks remembered under one key (pods that
// differ in a part the key does not hold), so that a lookup stays short.
const maxChecksPerKey = 8

// NewCheckMemo returns an empty memo over h's snapshot.
func (h *Handle) NewCheckMemo() *CheckMemo {
	return &CheckMemo{h: h, gen: h.snapshot.interPodGen, checks: map[memoKey][]*PodCheck{}}
}

// Prepare is Handle.Prepare, with the result of an interchangeable pod
// prepared earlier when the memo holds one that still holds.
func (m *CheckMemo) Prepare(ctx context.Context, pod *apiv1.Pod) *PodCheck {
	if gen := m.h.snapshot.interPodGen; gen != m.gen {
		clear(m.checks)
		m.gen = gen
	}
	key := memoKeyOf(pod)
	if key.containers == nil {
		return m.h.Prepare(ctx, pod)
	}
	for _, c := range m.checks[key] {
		if interchangeable(c.pod, pod) {
			return c.lentTo(pod)
		}
	}
	if len(m.checks[key]) >= maxChecksPerKey || len(pod.Spec.ResourceClaims) > 0 || m.h.PodByPodReason(pod) != "" {
		return m.h.Prepare(ctx, pod)
	}
	// Prepared for a copy of its own: the caller may bind its pod to the
	// node found for it (a drain simulation does), the memo's must stay
	// as it was prepared.
	own := *pod
	c := m.h.Prepare(ctx, &own)
	m.checks[key] = append(m.checks[key], c)
	return c.lentTo(pod)
}

// lentTo returns c for pod, interchangeable with c's pod: the same PreFilter
// state, and the Filter plugins and the errors are given pod itself.
func (c *PodCheck) lentTo(pod *apiv1.Pod) *PodCheck {
	out := *c
	out.pod = pod
	if u, ok := c.err.(*Unschedulable); ok {
		cp := *u
		cp.Pod = pod
		out.err = &cp
	}
	return &out
}

// interchangeable reports whether the scheduler's PreFilter and Filter
// plugins cannot tell a from b, two pods whose check is pod-local: their
// metadata and specs hold the same values, compared as references (the same
// arrays, maps and structs, as the informers' cache shares them between the
// pods of a workload: two equal parts held apart count as different), but
// for what names one pod (ObjectMeta's name, UID, resource version,
// generation, creation time, managed fields; pointers to plain values are
// compared by value) and their volumes when all
// are node-local: PodByPodReason's premise is that no plugin looks at those,
// and their names are the pod's own (a service account token's). Status is
// not compared: the plugins read a pending pod's spec (its requests
// included), and its status only for resource claims, which pod-local pods
// do not have.
func interchangeable(a, b *apiv1.Pod) bool {
	if a == b {
		return true
	}
	if !sameFields(reflect.ValueOf(&a.ObjectMeta).Elem(), reflect.ValueOf(&b.ObjectMeta).Elem(), podIdentityFields) {
		return false
	}
	if !sameFields(reflect.ValueOf(&a.Spec).Elem(), reflect.ValueOf(&b.Spec).Elem(), volumesField) {
		return false
	}
	return sameVolumes(a.Spec.Volumes, b.Spec.Volumes)
}

// podIdentityFields are the ObjectMeta fields that tell pods apart.
var podIdentityFields = map[string]bool{"Name": true, "UID": true, "ResourceVersion": true, "Generation": true,
	"CreationTimestamp": true, "ManagedFields": true, "SelfLink": true}

var volumesField = map[string]bool{"Volumes": true}

// sameVolumes: the same volumes, or volumes that are all node-local on both.
func sameVolumes(a, b []apiv1.Volume) bool {
	if len(a) == len(b) && (len(a) == 0 || unsafe.SliceData(a) == unsafe.SliceData(b)) {
		return true
	}
	for _, vs := range [][]apiv1.Volume{a, b} {
		for _, v := range vs {
			if !nodeLocalVolume(v.VolumeSource) {
				return false
			}
		}
	}
	return true
}

// sameFields compares the fields of structs a and b (of one type) with
// sameRef, but those named in skip.
func sameFields(a, b reflect.Value, skip map[string]bool) bool {
	t := a.Type()
	for i := range t.NumField() {
		if skip[t.Field(i).Name] {
			continue
		}
		if !sameRef(a.Field(i), b.Field(i)) {
			return false
		}
	}
	return true
}

// sameRef reports whether a and b (of one type) are the same value, read
// as references: plain values equal, maps and slices pointing to the same
// memory (or both empty), pointers to the same memory or to values that
// are sameRef, structs field by field. Any other kind counts as different.
func sameRef(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.Struct:
		for i := range a.NumField() {
			if !sameRef(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice, reflect.Map:
		return a.Len() == b.Len() && (a.Len() == 0 || a.UnsafePointer() == b.UnsafePointer())
	case reflect.Pointer:
		// The same struct or value, or both nil; or the same values (a
		// decoded pod holds its own *int64 and *bool fields).
		if a.UnsafePointer() == b.UnsafePointer() {
			return true
		}
		return !a.IsNil() && !b.IsNil() && sameRef(a.Elem(), b.Elem())
	case reflect.String:
		return a.String() == b.String()
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return a.Uint() == b.Uint()
	}
	return false
}
