// Package leaderlease gives up the leader-election Lease of a replica that
// stops leading. client-go's elector releases the Lease once, on the record
// it last saw; a renewal cancelled in flight may still land after that read,
// and the release then fails with a conflict, leaving the Lease held for a
// whole lease duration. Release reads the Lease again and clears the holder
// as long as it is still this replica, whatever happened in between.
//
// It imports client-go's resourcelock only; nothing of the autoscaler.
package leaderlease
