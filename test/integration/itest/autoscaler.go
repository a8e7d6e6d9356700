package itest

const Acquired = "Acquired the leader-election lease"
