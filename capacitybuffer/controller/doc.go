// Package controller is the CapacityBuffer controller
// (--capacity-buffer-controller-enabled): it translates each buffer of the
// active-capacity strategy into a pod template and a number of chunks, and
// writes them, with the ReadyForProvisioning condition, to the buffer's
// status, by server-side apply as its own field manager. The pod shape comes
// from spec.podTemplateRef's PodTemplate or from spec.scalableRef's object
// (its scale subresource for the replica count, its pod template or, for a
// kind without one, the template of its newest pod's controller, read
// through the API and never from the trimmed informer cache, for the shape); with --capacity-buffer-pod-dry-run-enabled the
// shape is what the API server makes of a pod of that template in a server
// dry-run (defaulting, LimitRanges, mutating webhooks), kept in a PodTemplate
// the buffer owns. With WithQuotas, the chunks are cut to what the
// namespace's ResourceQuotas leave (LimitedByQuotas), older buffers first.
// A spec that cannot be translated gets the condition False
// with a reason; nothing panics on bad input. It also exports
// cluster_autoscaler_capacity_buffer_oldest_reconciliation_timestamp_seconds.
//
// It may import capacitybuffer, its apis and client-go; it must not import
// core/, scaleup/, processors/ or package main.
package controller
