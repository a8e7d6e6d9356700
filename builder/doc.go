// Package builder is the autoscaler's composition root as an importable
// package: it wires the other packages together and implements nothing of
// its own. Package main parses the flags into config.Options and calls
// Start; the explain command and the loop benchmark call the same steps.
//
// Each step is a function that takes what it needs explicitly and returns
// what it built (NewInformers, NewProvider, NewEventRecorder, NewScaleUp,
// NewScaleDown, NewProvReqProcessor, NewBuffers, NewProcessors, ...);
// NewLoop composes the loop's steps in order and Run the whole process:
// informers, provider, events, loop, runner, triggers (Watch), caches. What a
// step must undo at the end is pushed on a Stack and undone in reverse
// order. No context is kept in a struct: the contexts a step starts
// goroutines on are passed to it.
//
// config.Options stops here: options.go maps the flags to each package's own
// options (ClusterStateOptions, ScaleUpOptions, ScaleDownOptions,
// DrainOptions, CoreOptions, ProviderOptions, and HealingOptions in
// healing.go), so that a package reads only the flags its Options name.
//
// It may import every package of the module but package main and the
// explain command (explain/command), which import it.
package builder
