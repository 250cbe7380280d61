package main

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// countingCore counts the With calls that reach the core under the wrapper.
type countingCore struct {
	zapcore.Core
	withs *int
}

func (c countingCore) With(fields []zapcore.Field) zapcore.Core {
	*c.withs++
	return countingCore{c.Core.With(fields), c.withs}
}

func TestLazyWithEncodesOnlyWhatIsWritten(t *testing.T) {
	var buf bytes.Buffer
	withs := 0
	enc := zapcore.NewJSONEncoder(zapcore.EncoderConfig{MessageKey: "msg"})
	core := lazyWithCore{countingCore{zapcore.NewCore(enc, zapcore.AddSync(&buf), zapcore.InfoLevel), &withs}}

	quiet := core.With([]zapcore.Field{{Key: "controller", Type: zapcore.StringType, String: "batchaccount"}}).
		With([]zapcore.Field{{Key: "reconcileID", Type: zapcore.StringType, String: "r1"}})
	if ce := quiet.Check(zapcore.Entry{Level: zapcore.DebugLevel, Message: "not enabled"}, nil); ce != nil {
		t.Fatal("a debug entry was enabled at info level")
	}
	if withs != 0 {
		t.Fatalf("%d With calls reached the core before any entry was written, want 0", withs)
	}

	ce := quiet.Check(zapcore.Entry{Level: zapcore.InfoLevel, Message: "written"}, nil)
	if ce == nil {
		t.Fatal("an info entry was not enabled")
	}
	ce.Write(zapcore.Field{Key: "extra", Type: zapcore.StringType, String: "x"})
	if withs != 2 {
		t.Errorf("%d With calls reached the core once an entry was written, want 2 (one per level)", withs)
	}
	for _, want := range []string{`"controller":"batchaccount"`, `"reconcileID":"r1"`, `"extra":"x"`, `"msg":"written"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("written entry %s lacks %s", buf.String(), want)
		}
	}
}

func TestNewLoggerKeepsFieldsOfNestedWithValues(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(&zap.Options{DestWriter: &buf})
	log.WithName("setup").WithValues("a", 1).WithValues("b", "two").Info("hello")
	for _, want := range []string{`"logger":"setup"`, `"a":1`, `"b":"two"`, `"msg":"hello"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("entry %s lacks %s", buf.String(), want)
		}
	}
}
