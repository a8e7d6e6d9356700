// Package capacitybuffers is what the loop sees of CapacityBuffers
// (--capacity-buffer-pod-injection-enabled): Injector is a pod-list
// processor that appends, for every buffer the controller made ready,
// status.replicas pods of its template to the pending pods (marked as the
// buffer's, never created in the API), and a scale-up status processor that
// writes the buffers' Provisioning condition and records TriggeredScaleUp and
// NotTriggerScaleUp on them; with WithReadyReplicas
// (--capacity-buffer-ready-replicas-enabled) it also writes each buffer's
// status.readyReplicas: how many of its pods the loop placed on existing
// nodes, as a field manager of its own.
//
// The injected pods come last in the list, after every real pending pod, so
// that room on existing nodes goes to real pods first; those that fit
// existing or upcoming nodes are placed in the loop's simulation, where the
// scale-down sees them (a node holding one is not removed), and the others
// make the scale-up add nodes. The scheduler never sees them: real pods take
// the room at once, and the next loop provisions the buffer again.
//
// It may import capacitybuffer, its apis, scaleup and processors; it must
// not import core, package main or capacitybuffer/controller.
package capacitybuffers
