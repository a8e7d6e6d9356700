// Package fencing tests, against the real local control plane and binary, how node healing fences a
// partitioned node: the second copy of a StatefulSet pod starts only once the first one's machine is gone.
// A package of its own because its two tests wait on the cloud's deletion delay (minutes); the same on
// Cluster API is package fencingcapi.
package fencing
