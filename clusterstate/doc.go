// Package clusterstate owns what the autoscaler knows about node health over
// time: readiness of nodes (ready, unready, not started), and, as the project
// grows, upcoming and unregistered nodes, in-flight scale-ups and back-off.
// It must not import core/ or call the API server.
package clusterstate
