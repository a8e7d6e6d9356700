package framework

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// verbosityCap limits what the scheduler framework and its plugins log
// through the simulation's context (--scheduler-verbosity): a message at
// V(n) is written only when n is at most the cap, and, as before, the
// autoscaler's own -v allows it. Errors always pass.
type verbosityCap struct {
	max int
}

// wrap returns ctx with its logger capped. When the global verbosity
// already hides every level above the cap, ctx is returned as it is (the
// common case: no allocation on the hot path).
func (v verbosityCap) wrap(ctx context.Context) context.Context {
	if !klog.V(klog.Level(max(v.max, 0)+1)).Enabled() && v.max >= 0 {
		return ctx
	}
	return klog.NewContext(ctx, v.logger(klog.FromContext(ctx)))
}

func (v verbosityCap) logger(l logr.Logger) logr.Logger {
	sink := l.GetSink()
	if sink == nil {
		return l
	}
	return l.WithSink(&cappedSink{LogSink: sink, max: v.max})
}

// cappedSink drops Info messages above max.
type cappedSink struct {
	logr.LogSink
	max int
}

func (s *cappedSink) Enabled(level int) bool {
	return level <= s.max && s.LogSink.Enabled(level)
}

func (s *cappedSink) Info(level int, msg string, kv ...any) {
	if level <= s.max {
		s.LogSink.Info(level, msg, kv...)
	}
}

func (s *cappedSink) WithValues(kv ...any) logr.LogSink {
	return &cappedSink{LogSink: s.LogSink.WithValues(kv...), max: s.max}
}

func (s *cappedSink) WithName(name string) logr.LogSink {
	return &cappedSink{LogSink: s.LogSink.WithName(name), max: s.max}
}

// WithCallDepth keeps the caller's file and line right when the sink
// reports them.
func (s *cappedSink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.LogSink.(logr.CallDepthLogSink); ok {
		return &cappedSink{LogSink: cd.WithCallDepth(depth + 1), max: s.max}
	}
	return s
}
