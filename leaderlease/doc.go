// Package leaderlease holds the leader-election Lease's lock and its release.
//
// InstanceLock is the lock: the holder identity is the hostname, as
// upstream's, and every write also names the process (an annotation), so
// that a Lease written under this identity by another process (a second
// replica on one host, a previous run) counts as someone else's and the
// elector waits for it instead of leading beside it.
//
// Release gives up the Lease of a replica that stops leading. client-go's
// elector releases the Lease once, on the record it last saw; a renewal
// cancelled in flight may still land after that read, and the release then
// fails with a conflict, leaving the Lease held for a whole lease duration.
// Release reads the Lease again and clears the holder as long as it is still
// this replica, whatever happened in between.
//
// Run runs the autoscaler while this replica holds the Lease (client-go's
// elector on InstanceLock), releases it with Release when the autoscaler
// stops, and tells a lost Lease (ErrLost) from a shutdown.
//
// It imports client-go only; nothing of the autoscaler.
package leaderlease
