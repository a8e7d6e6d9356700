// Package timers holds the checks that wait only for the autoscaler's own
// timers (the unneeded time, the delay after a scale-up, a node group's
// back-off, a ProvisioningRequest's booking and expiry), run at upstream's
// defaults of minutes and days on a fake clock: the autoscaler is wired by
// package builder inside the test process (inprocess.Start) on a real
// control plane, and each loop runs when a test calls it, at the fake
// clock's time. The tests that need the binary (its flags, logs, signals
// and restarts as a process) stay in the other packages.
package timers
