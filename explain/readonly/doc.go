// Package readonly makes the clients of `cluster-autoscaler explain`
// unable to change anything: a REST transport that refuses every request
// but GET, LIST and WATCH (which are all GETs on the wire) before it leaves
// the process, and a cloud provider whose node groups plan increases
// without making them and refuse every deletion. It imports the REST
// client and package cloudprovider, nothing of the loop.
package readonly
