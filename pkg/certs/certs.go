// Package certs lets the manager run its admission webhooks without cert-manager: it
// generates a CA and a serving certificate into a Secret, rotates them before they
// expire, and injects the CA into batchledger's webhook configurations. The Secret is
// mounted as the webhook certificate folder, so the kubelet delivers rotated files and
// the webhook server's certificate watcher picks them up without a restart.
//
// It wraps github.com/open-policy-agent/cert-controller, the rotator Kueue uses for the
// same purpose.
package certs

import (
	"errors"
	"fmt"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
)

// The rotator reads the Secret through a cache of its own namespace only and updates it
// in place (it must already exist: the install manifests create it empty, so the
// manager never needs to create secrets). It reads the two webhook configurations
// through that cache too (never a direct get) and updates their caBundle with a plain
// update (never a patch).
//
// Writes are granted by resourceNames, on exactly the objects the install creates; the
// names are the unprefixed ones of config/ (kustomize's name references add the prefix,
// the chart maps them to the release's names). Reads cannot be: an informer lists and
// watches the whole collection, and Kubernetes authorizes a list by name only when the
// request carries a metadata.name field selector, which the rotator's cache does not
// send. So list and watch stay in a rule of their own, without resourceNames; the
// configurations hold no secret (a CA bundle is public).
//
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=list;watch
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=update,resourceNames=webhook-server-cert
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=update,resourceNames=validating-webhook-configuration
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,verbs=update,resourceNames=mutating-webhook-configuration

// Default names, as config/default renders them (namePrefix batchledger-) and as the
// Helm chart names them for a release called batchledger; the manager's flags default
// to them.
const (
	DefaultSecretName                     = "batchledger-webhook-server-cert"
	DefaultServiceName                    = "batchledger-webhook-service"
	DefaultValidatingWebhookConfiguration = "batchledger-validating-webhook-configuration"
	DefaultMutatingWebhookConfiguration   = "batchledger-mutating-webhook-configuration"
)

// Options say where the certificate lives and whom it serves.
type Options struct {
	// Namespace of the manager: the Secret and the webhook Service are there.
	Namespace string
	// SecretName is the Secret holding ca.crt, ca.key, tls.crt and tls.key; it is
	// mounted at CertDir.
	SecretName string
	// ServiceName is the webhook Service; the serving certificate is issued for
	// SERVICE.NAMESPACE.svc (and .svc.cluster.local).
	ServiceName string
	// CertDir is where the mounted Secret shows tls.crt and tls.key.
	CertDir string
	// ValidatingWebhookConfiguration and MutatingWebhookConfiguration are the names of
	// the configurations whose caBundle is kept equal to the CA.
	ValidatingWebhookConfiguration, MutatingWebhookConfiguration string
}

func (o Options) validate() error {
	var errs []error
	for _, f := range []struct{ name, value string }{
		{"namespace", o.Namespace}, {"secret name", o.SecretName}, {"service name", o.ServiceName},
		{"cert dir", o.CertDir}, {"validating webhook configuration", o.ValidatingWebhookConfiguration},
		{"mutating webhook configuration", o.MutatingWebhookConfiguration},
	} {
		if f.value == "" {
			errs = append(errs, fmt.Errorf("%s is empty", f.name))
		}
	}
	return errors.Join(errs...)
}

// Rotator returns the cert-controller rotator for o; closing ready signals that the
// serving certificate is on disk and the CA is in both webhook configurations.
func (o Options) Rotator(ready chan struct{}) *rotator.CertRotator {
	svc := fmt.Sprintf("%s.%s.svc", o.ServiceName, o.Namespace)
	return &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: o.Namespace, Name: o.SecretName},
		CertDir:        o.CertDir,
		CAName:         "batchledger-ca",
		CAOrganization: "batchledger",
		DNSName:        svc,
		ExtraDNSNames:  []string{svc + ".cluster.local"},
		IsReady:        ready,
		Webhooks: []rotator.WebhookInfo{
			{Type: rotator.Validating, Name: o.ValidatingWebhookConfiguration},
			{Type: rotator.Mutating, Name: o.MutatingWebhookConfiguration},
		},
		FieldOwner: "batchledger",
		// Every replica serves webhooks, so every replica runs the rotator, not only the
		// leader: a standby must become ready too. Replicas racing to create the first CA
		// are serialized by the Secret's resourceVersion; the loser re-reads and adopts it.
		RequireLeaderElection: false,
		// Inject the CA only once this replica sees the certificate files, so the API
		// server is not pointed at a CA before any replica can serve with it.
		EnableReadinessCheck: true,
	}
}

// Setup adds the certificate rotator to mgr. The returned channel is closed once the
// serving certificate is in CertDir and the CA is injected; until then the webhook
// server must not start (its certificate watcher fails on missing files).
func Setup(mgr ctrl.Manager, o Options) (<-chan struct{}, error) {
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("self-managed webhook certificates: %w", err)
	}
	ready := make(chan struct{})
	if err := rotator.AddRotator(mgr, o.Rotator(ready)); err != nil {
		return nil, fmt.Errorf("adding the certificate rotator: %w", err)
	}
	return ready, nil
}
