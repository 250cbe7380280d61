package webhook

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// unclassifiedObjects counts admission requests a batchledger webhook could not classify
// (an undecodable object, a failed lookup) and therefore allowed unchanged: a webhook of an
// add-on never denies someone else's object because of its own trouble.
var unclassifiedObjects = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "batchledger_webhook_unclassified_total",
	Help: "Admission requests a batchledger webhook could not classify and allowed unchanged, by webhook path.",
}, []string{"webhook"})

// undeliveredAccounts counts the accounts the scope webhook found stored but not yet
// delivered to the cache (UndeliveredAccounts), and read from the API server: how often
// a Job's creation overtook its account's watch event on this replica.
var undeliveredAccounts = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "batchledger_webhook_undelivered_accounts_total",
	Help: "Accounts the scope webhook found stored but not yet in the manager's cache, and read from the API server.",
})

func init() { metrics.Registry.MustRegister(unclassifiedObjects, undeliveredAccounts) }

// unclassified allows an object the webhook could not classify, with an admission warning
// (kubectl prints it) and a metric.
func unclassified(path string, err error) admission.Response {
	unclassifiedObjects.WithLabelValues(path).Inc()
	return admission.Allowed("").WithWarnings("batchledger could not classify this object and left it unchanged: " + err.Error())
}
