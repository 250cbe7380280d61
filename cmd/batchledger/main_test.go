package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/controller"
	trainjobkind "batchledger.dev/batchledger/pkg/kinds/trainjob"
	blscheme "batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/version"
)

// TestConfig: the flags parse into the config, --cert-management takes one of its two
// values, a hold or retention is not negative nor under a minute, a pacing delay or
// recheck is not negative (nor an unfound target recheck above 5m), a sweep or API
// recheck is not back to back, the API budget and the account syncs are positive, the
// leader election timing is one client-go accepts, the webhook port is a TCP port, the
// manager's key Secret has a name, the certificate folder defaults to
// controller-runtime's, and the manager issues its own certificate only when it serves
// webhooks.
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
		{"the worker role", []string{"--role=worker"}, false, false, ""},
		{"unknown role", []string{"--role=observer"}, true, false, ""},
		{"no result hold: the default", []string{"--max-result-hold=0"}, false, false, ""},
		{"a negative result hold", []string{"--max-result-hold=-1h"}, true, false, ""},
		{"no worker result retention: the default", []string{"--role=worker", "--worker-result-retention=0"}, false, false, ""},
		{"a negative worker result retention", []string{"--role=worker", "--worker-result-retention=-1s"}, true, false, ""},
		{"a result hold of a minute", []string{"--max-result-hold=1m"}, false, false, ""},
		{"a result hold of a second", []string{"--max-result-hold=1s"}, true, false, ""},
		{"a worker result retention of a minute", []string{"--role=worker", "--worker-result-retention=1m"}, false, false, ""},
		{"a worker result retention of a millisecond", []string{"--role=worker", "--worker-result-retention=1ms"}, true, false, ""},
		{"progress written at once", []string{"--workload-message-interval=0", "--waiting-status-delay=0"}, false, false, ""},
		{"a negative workload message interval", []string{"--workload-message-interval=-10s"}, true, false, ""},
		{"a negative waiting status delay", []string{"--waiting-status-delay=-30s"}, true, false, ""},
		{"no unfound target recheck: the default", []string{"--unfound-target-recheck=0"}, false, false, ""},
		{"a negative unfound target recheck", []string{"--unfound-target-recheck=-1m"}, true, false, ""},
		{"the longest unfound target recheck", []string{"--unfound-target-recheck=5m"}, false, false, ""},
		{"an unfound target recheck beyond the longest", []string{"--unfound-target-recheck=24h"}, true, false, ""},
		{"short-form sweep only at start", []string{"--short-form-sweep-interval=0"}, false, false, ""},
		{"a short-form sweep every second", []string{"--short-form-sweep-interval=1s"}, false, false, ""},
		{"a negative short-form sweep interval", []string{"--short-form-sweep-interval=-10m"}, true, false, ""},
		{"a short-form sweep every millisecond", []string{"--short-form-sweep-interval=1ms"}, true, false, ""},
		{"no API recheck interval: the default", []string{"--api-recheck-interval=0"}, false, false, ""},
		{"an API recheck every 2s", []string{"--api-recheck-interval=2s"}, false, false, ""},
		{"a negative API recheck interval", []string{"--api-recheck-interval=-30s"}, true, false, ""},
		{"an API recheck every millisecond", []string{"--api-recheck-interval=1ms"}, true, false, ""},
		{"a fractional API budget", []string{"--kube-api-qps=2.5", "--kube-api-burst=1"}, false, false, ""},
		{"no API QPS", []string{"--kube-api-qps=0"}, true, false, ""},
		{"a negative API QPS", []string{"--kube-api-qps=-1"}, true, false, ""},
		{"an API QPS not a number", []string{"--kube-api-qps=NaN"}, true, false, ""},
		{"an infinite API QPS", []string{"--kube-api-qps=Inf"}, true, false, ""},
		{"an API QPS beyond float32", []string{"--kube-api-qps=1e39"}, true, false, ""},
		{"no API burst", []string{"--kube-api-burst=0"}, true, false, ""},
		{"a negative API burst", []string{"--kube-api-burst=-5"}, true, false, ""},
		{"one account sync", []string{"--concurrent-account-syncs=1"}, false, false, ""},
		{"no account syncs", []string{"--concurrent-account-syncs=0"}, true, false, ""},
		{"negative account syncs", []string{"--concurrent-account-syncs=-2"}, true, false, ""},
		{"leader election, the default timing", []string{"--leader-elect"}, false, false, ""},
		{"leader election, the tests' timing", []string{"--leader-elect", "--leader-elect-lease-duration=8s",
			"--leader-elect-renew-deadline=6s", "--leader-elect-retry-period=1s"}, false, false, ""},
		{"leader election, a lease no longer than the renew deadline", []string{"--leader-elect", "--leader-elect-lease-duration=10s"}, true, false, ""},
		{"leader election, a renew deadline within 1.2 retry periods", []string{"--leader-elect", "--leader-elect-renew-deadline=2400ms"}, true, false, ""},
		{"leader election, no retry period", []string{"--leader-elect", "--leader-elect-retry-period=0"}, true, false, ""},
		{"leader election, a negative lease", []string{"--leader-elect", "--leader-elect-lease-duration=-15s"}, true, false, ""},
		{"no leader election: its timing unused", []string{"--leader-elect=false", "--leader-elect-lease-duration=0"}, false, false, ""},
		{"webhook port 0", []string{"--webhook-port=0"}, true, false, ""},
		{"webhook port 70000", []string{"--webhook-port=70000"}, true, false, ""},
		{"a key Secret of one's own", []string{"--ledger-key-secret=my-key"}, false, false, ""},
		{"no key Secret", []string{"--ledger-key-secret="}, true, false, ""},
		{"a key Secret name the API refuses", []string{"--ledger-key-secret=Ledger_Key"}, true, false, ""},
		{"the worker role reads no key", []string{"--role=worker", "--ledger-key-secret="}, false, false, ""},
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

// TestAPIWiring: the manager is built on the RESTMapper that found which optional APIs
// are served, without the cache settings of a kind not served (the cache would refuse to
// start), and the reconcilers learn the same answer; the recheck defaults to 30s.
func TestAPIWiring(t *testing.T) {
	fs := flag.NewFlagSet("batchledger", flag.ContinueOnError)
	c := bindFlags(fs)
	if err := fs.Parse(nil); err != nil || c.validate() != nil {
		t.Fatal(err)
	}
	if c.apiRecheck != controller.DefaultAPIRecheck {
		t.Errorf("--api-recheck-interval defaults to %s", c.apiRecheck)
	}
	s, err := blscheme.New()
	if err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	// Served: Kueue and Trainer; not JobSet.
	w := &apiWiring{served: controller.NewServedAPIs(controller.OptionalAPIs, controller.APIWorkload, controller.KindAPI(trainjobkind.Kind{})), mapper: mapper}
	opts := c.managerOptions(s, nil)
	w.apply(&opts, s)
	for obj := range opts.Cache.ByObject {
		if _, ok := obj.(*jobsetapi.JobSet); ok {
			t.Error("the JobSet cache settings were kept, JobSet is not served")
		}
	}
	if len(opts.Cache.ByObject) != len(controller.CacheOptions().ByObject)-1 {
		t.Errorf("cache settings of %d kinds, want all but JobSet's", len(opts.Cache.ByObject))
	}
	if got, err := opts.MapperProvider(nil, nil); err != nil || got != meta.RESTMapper(mapper) {
		t.Errorf("MapperProvider = %v, %v; want the mapper discovery asked", got, err)
	}
	if wa := w.watch(time.Second); wa.Wired != w.served || wa.Interval != time.Second {
		t.Errorf("watch = %+v", wa)
	}
}

// TestAPIRecheckHelpNamesEveryOptionalAPI: --api-recheck-interval's help names the kind
// of every optional API the manager asks about (controller.OptionalAPIs).
func TestAPIRecheckHelpNamesEveryOptionalAPI(t *testing.T) {
	fs := flag.NewFlagSet("batchledger", flag.ContinueOnError)
	bindFlags(fs)
	usage := fs.Lookup("api-recheck-interval").Usage
	for _, api := range controller.OptionalAPIs {
		t.Run(api.GVK.Kind, func(t *testing.T) {
			if !strings.Contains(usage, api.GVK.Kind) {
				t.Errorf("--api-recheck-interval's help %q does not name %s", usage, api.GVK.Kind)
			}
		})
	}
}

// runMainEnv, set in the environment of the test binary, makes it run the manager's main
// with the value as the stamped version (TestVersionFlag), instead of the tests.
const runMainEnv = "BATCHLEDGER_TEST_RUN_MAIN_AS_VERSION"

func TestMain(m *testing.M) {
	if v := os.Getenv(runMainEnv); v != "" {
		version.Version = v
		main()
		// main returns only when the manager stops; --version must exit before.
		fmt.Fprintln(os.Stderr, "main returned")
		os.Exit(3)
	}
	os.Exit(m.Run())
}

// TestVersionFlag: `batchledger --version` prints the stamped version's one line and
// exits 0 before it looks for a cluster (the kubeconfig given is absent).
func TestVersionFlag(t *testing.T) {
	cmd := exec.Command(os.Args[0], "--version")
	cmd.Env = append(os.Environ(), runMainEnv+"=v9.8.7", "KUBECONFIG="+filepath.Join(t.TempDir(), "absent"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("batchledger --version: %v; stderr %q", err, stderr.String())
	}
	got := stdout.String()
	if !strings.HasPrefix(got, "v9.8.7 (") || strings.Count(got, "\n") != 1 || !strings.HasSuffix(got, ")\n") {
		t.Errorf("stdout = %q, want one line %q", got, "v9.8.7 (revision, go version platform)")
	}
}
