package main

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfig: the flags parse into the config, --cert-management takes one of its two
// values, the certificate folder defaults to controller-runtime's, and the manager
// issues its own certificate only when it serves webhooks.
func TestConfig(t *testing.T) {
	cases := []struct {
		name      string
		args      []string
		wantErr   bool
		selfCerts bool
		certDir   string
	}{
		{"defaults", nil, false, false, filepath.Join("k8s-webhook-server", "serving-certs")},
		{"self-managed certificates", []string{"--cert-management=self"}, false, true, ""},
		{"self-managed, webhooks off", []string{"--cert-management=self", "--enable-webhooks=false"}, false, false, ""},
		{"a folder of one's own", []string{"--webhook-cert-dir=/certs"}, false, false, "/certs"},
		{"unknown certificate management", []string{"--cert-management=vault"}, true, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("batchledger", flag.ContinueOnError)
			c := bindFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := c.validate()
			if (err != nil) != tc.wantErr {
				t.Fatalf("validate() = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if c.selfCerts() != tc.selfCerts {
				t.Errorf("selfCerts() = %v, want %v", c.selfCerts(), tc.selfCerts)
			}
			if !strings.HasSuffix(c.certDir, tc.certDir) || !filepath.IsAbs(c.certDir) {
				t.Errorf("certDir = %q, want an absolute path ending in %q", c.certDir, tc.certDir)
			}
			if opts := c.webhookOptions(); opts.CertDir != c.certDir || opts.Port != 9443 || len(opts.TLSOpts) != 2 {
				t.Errorf("webhook options %+v", opts)
			}
		})
	}
}
