package main

import (
	"github.com/go-logr/logr"
	uberzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// newLogger is the process's logger, from the --zap-* flags in opts. Its With is lazy:
// controller-runtime gives every reconcile a logger with the controller, the object and
// a reconcile ID, and zap encodes such fields when they are added; nearly no reconcile
// logs anything at the default level, and under the Kueue baseline that encoding was 2%
// of the controller's CPU. The fields are now encoded at the first entry written.
func newLogger(opts *zap.Options) logr.Logger {
	opts.ZapOpts = append(opts.ZapOpts, uberzap.WrapCore(func(c zapcore.Core) zapcore.Core { return lazyWithCore{c} }))
	return zap.New(zap.UseFlagOptions(opts))
}

// lazyWithCore defers a With's fields to the first entry the core writes, at every level
// of nesting: zapcore.NewLazyWith alone is lazy once, and a With on it encodes.
type lazyWithCore struct{ zapcore.Core }

// With returns a core that adds fields when it first checks an enabled entry or writes.
func (c lazyWithCore) With(fields []zapcore.Field) zapcore.Core {
	return lazyWithCore{zapcore.NewLazyWith(c.Core, fields)}
}
