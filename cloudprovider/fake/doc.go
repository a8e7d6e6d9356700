// Package fake is an in-memory CloudProvider for unit tests of pure logic: node
// groups with instances, upstream's size rules (max on increase, min on delete,
// DecreaseTargetSize never deletes), recorded calls and injected errors. It
// never talks to an API server; anything that does is tested against the real
// local control plane with the kwok provider.
package fake
