// Package expander decides which way to scale up when several node groups
// could host the pending pods. An Option is one such way; a Filter keeps the
// best options of a kind (ties kept) and a Strategy settles on exactly one.
// NewChain turns the --expander list into a Strategy: its filters narrow the
// options in order and a random choice breaks whatever tie is left.
//
// The expanders are random, most-pods, least-waste, least-nodes, price and
// priority; grpc is recognised but not implemented yet. They are decisions:
// they read the options, the template NodeInfos, the provider's pricing and
// the priority ConfigMap through an informer lister, and emit Warning events
// about that ConfigMap, but they never change the cluster or the cloud.
//
// This package must not import k8s.io/kubernetes, a concrete cloud provider,
// the scale-up orchestrator or package main.
package expander
