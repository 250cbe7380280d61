package main

import (
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
