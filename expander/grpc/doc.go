// Package grpc is the --expander=grpc client: it asks an external server
// speaking the expander plug-in protocol (protos, package grpcplugin) which
// scale-up options are best, and falls back when the server cannot answer
// usefully (error, timeout, empty reply, unknown node groups): to the
// filter given at construction (least-waste when grpc ends the chain) or,
// without one, to the rest of the --expander chain, which then sees every
// option. Each fallback is counted by reason.
//
// It imports expander (the Option and Filter types) and the generated
// protos; expander does not import it: the composition root passes its
// constructor in expander.Deps.
package grpc
