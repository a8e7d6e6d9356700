package itest

// Acquired is what the binary logs when it takes the leader-election lease.
const Acquired = "Acquired the leader-election lease"
