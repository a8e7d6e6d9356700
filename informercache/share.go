package informercache

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"reflect"
	"sort"
	"sync"
	"time"
	"unique"
	"unsafe"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// podSharer makes cached pods share the parts that the pods of one workload
// have in common, instead of each holding its own decoded copy: containers,
// labels, annotations, owner references, tolerations, node selector,
// affinity, spread constraints, the pod's security context, and the short
// strings (namespace, node, enums). The pods of a ReplicaSet differ only in
// their names, UIDs, node and status; what they share is about half of a
// trimmed pod's memory.
//
// Sharing is safe because cached objects are read-only: nothing may modify a
// pod from an informer (client-go's rule; a copy is made first), and a copy
// (DeepCopy) owns all its parts again.
//
// What it holds is bounded in bytes and kept only for parts a cached pod
// still uses. Each part is found by the SHA-256 of its protobuf encoding
// (32 bytes, not the encoding itself), and counts its encoded size plus
// partOverhead against maxBytes; a part that would go past the bound is not
// remembered (its pod keeps its own copy) and a sweep is asked for. A sweep
// (run: periodically, and soon after the bound is reached) drops every part
// that no pod in the informer's store holds and no pod took since the sweep
// began, so that the parts of deleted pods (large unique annotations, say)
// are not kept alive by the sharer.
type podSharer struct {
	mu       sync.Mutex
	maxBytes int64
	bytes    int64
	// sweeps counts the sweeps begun; a part records the value when a pod
	// last took it (or a sweep found it held).
	sweeps     uint64
	parts      map[partKey]*sharedPart
	byIdentity map[unsafe.Pointer]*sharedPart
	// full asks the sweeper for a sweep (capacity 1: asks do not pile up).
	full chan struct{}
}

// partKey is the digest of a part's kind and encoding.
type partKey [sha256.Size]byte

// sharedPart is one remembered part: value is a []apiv1.Container, a
// map[string]string, ... as its kind (folded into its key) says.
type sharedPart struct {
	key   partKey
	id    unsafe.Pointer // see sliceIdentity
	value any
	size  int64
	seen  uint64
}

// partOverhead is what a remembered part costs besides its encoding: its
// record, its two index entries and the boxed value.
const partOverhead = 160

func newPodSharer(maxBytes int64) *podSharer {
	return &podSharer{maxBytes: maxBytes, parts: map[partKey]*sharedPart{},
		byIdentity: map[unsafe.Pointer]*sharedPart{}, full: make(chan struct{}, 1)}
}

// share replaces the pod's parts by equal ones already cached. The pod must
// be freshly decoded (the informer's transform): its old parts are dropped.
func (s *podSharer) share(pod *apiv1.Pod) {
	keys := podShareKeys(pod)
	s.mu.Lock()
	defer s.mu.Unlock()
	pod.Spec.Containers = sharedValue(s, keys.containers, pod.Spec.Containers, sliceIdentity)
	pod.Spec.InitContainers = sharedValue(s, keys.initContainers, pod.Spec.InitContainers, sliceIdentity)
	pod.Labels = sharedValue(s, keys.labels, pod.Labels, mapIdentity)
	pod.Annotations = sharedValue(s, keys.annotations, pod.Annotations, mapIdentity)
	pod.Spec.NodeSelector = sharedValue(s, keys.nodeSelector, pod.Spec.NodeSelector, mapIdentity)
	pod.OwnerReferences = sharedValue(s, keys.owners, pod.OwnerReferences, sliceIdentity)
	pod.Spec.Tolerations = sharedValue(s, keys.tolerations, pod.Spec.Tolerations, sliceIdentity)
	pod.Spec.TopologySpreadConstraints = sharedValue(s, keys.spread, pod.Spec.TopologySpreadConstraints, sliceIdentity)
	pod.Spec.Affinity = sharedValue(s, keys.affinity, pod.Spec.Affinity, pointerIdentity)
	pod.Spec.SecurityContext = sharedValue(s, keys.security, pod.Spec.SecurityContext, pointerIdentity)
	internStrings(pod)
}

// sharedValue returns the value already remembered under k, or remembers v
// if the bound leaves room for it. An absent part (k.size 0) keeps v.
func sharedValue[T any](s *podSharer, k partRef, v T, identity func(T) unsafe.Pointer) T {
	if k.size == 0 {
		return v
	}
	if have, ok := s.parts[k.key]; ok {
		have.seen = s.sweeps
		return have.value.(T)
	}
	size := int64(k.size) + partOverhead
	if s.bytes+size > s.maxBytes {
		select {
		case s.full <- struct{}{}:
		default:
		}
		return v
	}
	p := &sharedPart{key: k.key, id: identity(v), value: v, size: size, seen: s.sweeps}
	s.parts[k.key] = p
	s.byIdentity[p.id] = p
	s.bytes += size
	return v
}

// The identity of a part is the address of what its value refers to: the
// array of a slice, the map, the struct of a pointer. A pod holding a
// remembered part holds that address.
func sliceIdentity[T any](v []T) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(v)) }

func mapIdentity(v map[string]string) unsafe.Pointer { return reflect.ValueOf(v).UnsafePointer() }

func pointerIdentity[T any](v *T) unsafe.Pointer { return unsafe.Pointer(v) }

// podParts returns the identities of the parts a pod holds that can be
// shared.
func podParts(pod *apiv1.Pod) [10]unsafe.Pointer {
	return [10]unsafe.Pointer{
		sliceIdentity(pod.Spec.Containers), sliceIdentity(pod.Spec.InitContainers),
		mapIdentity(pod.Labels), mapIdentity(pod.Annotations), mapIdentity(pod.Spec.NodeSelector),
		sliceIdentity(pod.OwnerReferences), sliceIdentity(pod.Spec.Tolerations),
		sliceIdentity(pod.Spec.TopologySpreadConstraints),
		pointerIdentity(pod.Spec.Affinity), pointerIdentity(pod.Spec.SecurityContext),
	}
}

// sweepChunk is how many pods a sweep marks per hold of the lock, so that
// the informer's transform never waits long behind a sweep.
const sweepChunk = 2000

// sweep forgets the parts that none of cached (the informer's store's
// objects) holds and no pod took since the sweep began. It returns how
// many parts it dropped and the bytes they counted.
func (s *podSharer) sweep(cached []any) (dropped int, freed int64) {
	s.mu.Lock()
	s.sweeps++
	gen := s.sweeps
	s.mu.Unlock()
	for start := 0; start < len(cached); start += sweepChunk {
		chunk := cached[start:min(start+sweepChunk, len(cached))]
		s.mu.Lock()
		for _, obj := range chunk {
			pod, ok := obj.(*apiv1.Pod)
			if !ok {
				continue
			}
			for _, id := range podParts(pod) {
				if p := s.byIdentity[id]; id != nil && p != nil {
					p.seen = gen
				}
			}
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, p := range s.parts {
		if p.seen >= gen {
			continue
		}
		if s.byIdentity[p.id] == p {
			delete(s.byIdentity, p.id)
		}
		delete(s.parts, key)
		s.bytes -= p.size
		dropped++
		freed += p.size
	}
	return dropped, freed
}

// heldBytes is what the remembered parts count against the bound.
func (s *podSharer) heldBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// CachedPods is the pod informer, as the sweeper reads it.
type CachedPods interface {
	HasSynced() bool
	GetStore() cache.Store
}

// Sweep timing: every sweepPeriod, and when the bound is reached, at most
// once per sweepGap.
const (
	sweepPeriod = time.Minute
	sweepGap    = 30 * time.Second
)

// run sweeps against the pods the informer caches, once it has synced, until
// ctx ends.
func (s *podSharer) run(ctx context.Context, pods CachedPods, clk clock.WithTicker, period, gap time.Duration) {
	logger := klog.FromContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced) {
		return
	}
	ticker := clk.NewTicker(period)
	defer ticker.Stop()
	last := clk.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		case <-s.full:
			if wait := gap - clk.Since(last); wait > 0 {
				select {
				case <-ctx.Done():
					return
				case <-clk.After(wait):
				}
			}
		}
		dropped, freed := s.sweep(pods.GetStore().List())
		last = clk.Now()
		logger.V(5).Info("Swept the informer cache's shared pod parts", "dropped", dropped, "freedBytes", freed,
			"heldBytes", s.heldBytes())
	}
}

// partRef is a part's key and encoded size; size 0: the part is absent
// (or could not be encoded) and is not shared.
type partRef struct {
	key  partKey
	size int
}

type shareKeys struct {
	containers, initContainers, labels, annotations, nodeSelector partRef
	owners, tolerations, spread, affinity, security               partRef
}

// marshaler is what the API types' generated protobuf code provides.
type marshaler interface{ Marshal() ([]byte, error) }

// Part kinds, folded into the digest: a kind always holds one Go type, and
// parts of different roles (labels, annotations) are never taken for each
// other.
const (
	kindContainers  = 'c'
	kindLabels      = 'l'
	kindAnnotations = 'a'
	kindSelector    = 's'
	kindOwners      = 'o'
	kindTolerations = 't'
	kindSpread      = 'p'
	kindAffinity    = 'f'
	kindSecurity    = 'x'
)

// podShareKeys computes, outside the lock, a key per part: the SHA-256 of
// its kind and protobuf encoding (equal encodings, equal values), or the
// zero partRef when the part is absent or cannot be encoded.
func podShareKeys(pod *apiv1.Pod) shareKeys {
	return shareKeys{
		containers:     sliceKey(kindContainers, pod.Spec.Containers),
		initContainers: sliceKey(kindContainers, pod.Spec.InitContainers),
		labels:         mapKey(kindLabels, pod.Labels),
		annotations:    mapKey(kindAnnotations, pod.Annotations),
		nodeSelector:   mapKey(kindSelector, pod.Spec.NodeSelector),
		owners:         sliceKey(kindOwners, pod.OwnerReferences),
		tolerations:    sliceKey(kindTolerations, pod.Spec.Tolerations),
		spread:         sliceKey(kindSpread, pod.Spec.TopologySpreadConstraints),
		affinity:       pointerKey(kindAffinity, pod.Spec.Affinity),
		security:       pointerKey(kindSecurity, pod.Spec.SecurityContext),
	}
}

// digest hashes a part's fields, each with a length prefix so that the
// fields' boundaries are part of the key.
type digest struct {
	h    hash.Hash
	size int
	n    [binary.MaxVarintLen64]byte
}

func newDigest(kind byte) *digest {
	d := &digest{h: sha256.New()}
	d.h.Write([]byte{kind})
	return d
}

func (d *digest) field(data []byte) {
	d.h.Write(d.n[:binary.PutUvarint(d.n[:], uint64(len(data)))])
	d.h.Write(data)
	d.size += len(data)
}

func (d *digest) ref() partRef {
	var r partRef
	d.h.Sum(r.key[:0])
	r.size = max(d.size, 1)
	return r
}

func sliceKey[T any, P interface {
	*T
	marshaler
}](kind byte, items []T) partRef {
	if len(items) == 0 {
		return partRef{}
	}
	d := newDigest(kind)
	for i := range items {
		data, err := P(&items[i]).Marshal()
		if err != nil {
			return partRef{}
		}
		d.field(data)
	}
	return d.ref()
}

func pointerKey[T any, P interface {
	*T
	marshaler
}](kind byte, p P) partRef {
	if p == nil {
		return partRef{}
	}
	data, err := p.Marshal()
	if err != nil {
		return partRef{}
	}
	d := newDigest(kind)
	d.field(data)
	return d.ref()
}

// mapKey digests a string map in key order; the empty map (as opposed to
// an absent one) is shared too.
func mapKey(kind byte, m map[string]string) partRef {
	if m == nil {
		return partRef{}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	d := newDigest(kind)
	for _, k := range keys {
		d.field([]byte(k))
		d.field([]byte(m[k]))
	}
	return d.ref()
}

// internStrings replaces short strings that many pods hold equal by one
// canonical copy (package unique frees it when no pod holds it any more).
func internStrings(pod *apiv1.Pod) {
	in := func(s *string) {
		if *s != "" {
			*s = unique.Make(*s).Value()
		}
	}
	in(&pod.Namespace)
	in(&pod.GenerateName)
	in(&pod.Spec.NodeName)
	in(&pod.Spec.SchedulerName)
	in(&pod.Spec.ServiceAccountName)
	in(&pod.Spec.DeprecatedServiceAccount)
	in(&pod.Spec.PriorityClassName)
	in((*string)(&pod.Spec.RestartPolicy))
	in((*string)(&pod.Spec.DNSPolicy))
	in((*string)(&pod.Status.Phase))
	in((*string)(&pod.Status.QOSClass))
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		in((*string)(&c.Type))
		in((*string)(&c.Status))
		in(&c.Reason)
	}
	for i := range pod.Status.ContainerStatuses {
		in(&pod.Status.ContainerStatuses[i].Name)
	}
}
