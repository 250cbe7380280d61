package certs

import (
	"strings"
	"testing"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
)

func options() Options {
	return Options{
		Namespace: "batchledger-system", SecretName: DefaultSecretName, ServiceName: DefaultServiceName,
		CertDir:                        "/etc/batchledger/webhook-certs",
		ValidatingWebhookConfiguration: DefaultValidatingWebhookConfiguration,
		MutatingWebhookConfiguration:   DefaultMutatingWebhookConfiguration,
	}
}

func TestRotatorServesTheWebhookService(t *testing.T) {
	ready := make(chan struct{})
	r := options().Rotator(ready)
	if r.DNSName != "batchledger-webhook-service.batchledger-system.svc" {
		t.Errorf("DNSName = %q", r.DNSName)
	}
	if len(r.ExtraDNSNames) != 1 || r.ExtraDNSNames[0] != "batchledger-webhook-service.batchledger-system.svc.cluster.local" {
		t.Errorf("ExtraDNSNames = %v", r.ExtraDNSNames)
	}
	if r.SecretKey.Namespace != "batchledger-system" || r.SecretKey.Name != DefaultSecretName {
		t.Errorf("SecretKey = %v", r.SecretKey)
	}
	want := []rotator.WebhookInfo{
		{Type: rotator.Validating, Name: DefaultValidatingWebhookConfiguration},
		{Type: rotator.Mutating, Name: DefaultMutatingWebhookConfiguration},
	}
	if len(r.Webhooks) != 2 || r.Webhooks[0] != want[0] || r.Webhooks[1] != want[1] {
		t.Errorf("Webhooks = %v, want %v", r.Webhooks, want)
	}
	if r.RequireLeaderElection {
		t.Error("the rotator must run on every replica: standbys serve webhooks too")
	}
	if r.IsReady != ready {
		t.Error("IsReady is not the given channel")
	}
}

func TestSetupRejectsIncompleteOptions(t *testing.T) {
	o := options()
	o.Namespace, o.CertDir = "", ""
	_, err := Setup(nil, o)
	if err == nil || !strings.Contains(err.Error(), "namespace is empty") || !strings.Contains(err.Error(), "cert dir is empty") {
		t.Fatalf("Setup with no namespace and cert dir: %v", err)
	}
}
