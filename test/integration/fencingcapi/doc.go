// Package fencingcapi tests, against the real local control plane, the real
// binary and Cluster API's own controllers, that node healing fences a
// partitioned node whose Node spells its provider ID otherwise than its
// Machine: the second copy of a StatefulSet pod starts only once the first
// one's Machine is gone. Apart from package fencing so that the two run side
// by side (each waits minutes on a deletion delay).
package fencingcapi
