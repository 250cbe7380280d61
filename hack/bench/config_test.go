package main

import (
	"flag"
	"io"
	"slices"
	"testing"
)

// TestControllerArgs: --controller-arg passes each flag to the controller, in order. (What
// is not a flag is refused by the flag set, which exits as for any bad flag.)
func TestControllerArgs(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{name: "none", args: nil, want: nil},
		{name: "two, in order", args: []string{"--controller-arg=--concurrent-account-syncs=10", "--controller-arg=--kube-api-qps=100"},
			want: []string{"--concurrent-account-syncs=10", "--kube-api-qps=100"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseLoadFlags(append([]string{"--sizes=1x1"}, tc.args...))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.controllerArgs, tc.want) {
				t.Errorf("controllerArgs = %q, want %q", cfg.controllerArgs, tc.want)
			}
		})
	}
}

// TestControllerEnv: --controller-env passes each NAME=VALUE, in order; what has no name
// or no "=" is refused.
func TestControllerEnv(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		want    []string
		wantErr bool
	}{
		{name: "none", args: nil, want: nil},
		{name: "two, in order", args: []string{"--controller-env=GOMAXPROCS=1", "--controller-env=GOGC=200"},
			want: []string{"GOMAXPROCS=1", "GOGC=200"}},
		{name: "an empty value", args: []string{"--controller-env=GODEBUG="}, want: []string{"GODEBUG="}},
		{name: "no =", args: []string{"--controller-env=GOGC"}, wantErr: true},
		{name: "no name", args: []string{"--controller-env==1"}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("bench", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			cfg, err := parseLoadFlagSet(fs, append([]string{"--sizes=1x1"}, tc.args...))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want an error: %t", err, tc.wantErr)
			}
			if !tc.wantErr && !slices.Equal(cfg.controllerEnv, tc.want) {
				t.Errorf("controllerEnv = %q, want %q", cfg.controllerEnv, tc.want)
			}
		})
	}
}

// TestBaselineWarmups: one uncounted warm-up run by default, none on request, and a
// negative count refused.
func TestBaselineWarmups(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		want    int
		wantErr bool
	}{
		{name: "default", want: 1},
		{name: "none", args: []string{"--warmups=0"}, want: 0},
		{name: "two", args: []string{"--warmups=2"}, want: 2},
		{name: "negative", args: []string{"--warmups=-1"}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseBaselineFlags(tc.args)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if err == nil && cfg.warmups != tc.want {
				t.Errorf("warmups = %d, want %d", cfg.warmups, tc.want)
			}
		})
	}
}
