package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"batchledger.dev/batchledger/pkg/controller"
)

// apiWiring is what the manager is wired for: the optional APIs (controller.OptionalAPIs)
// the cluster serves at start-up, asked through the RESTMapper the manager then uses, so
// that its caches map exactly the kinds found served.
type apiWiring struct {
	served *controller.ServedAPIs
	mapper meta.RESTMapper
	// recheck asks discovery afresh each time, for controller.WatchAPIs: the mapper keeps
	// a kind once found and would never see an API go.
	recheck controller.Lookup
}

// Start-up discovery is asked again while the API server does not answer, as long as a
// manager that cannot reach it would wait anyway.
const (
	discoveryRetry   = 2 * time.Second
	discoveryTimeout = time.Minute
)

// discoverAPIs creates the manager's RESTMapper and asks it which optional APIs are
// served.
func discoverAPIs(ctx context.Context, restCfg *rest.Config) (*apiWiring, error) {
	hc, err := rest.HTTPClientFor(restCfg)
	if err != nil {
		return nil, fmt.Errorf("creating the HTTP client: %w", err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(restCfg, hc)
	if err != nil {
		return nil, fmt.Errorf("creating the RESTMapper: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfigAndClient(restCfg, hc)
	if err != nil {
		return nil, fmt.Errorf("creating the discovery client: %w", err)
	}
	served, err := controller.DiscoverAPIsRetrying(ctx, controller.MapperLookup(mapper), controller.OptionalAPIs, discoveryRetry, discoveryTimeout)
	if err != nil {
		return nil, err
	}
	return &apiWiring{served: served, mapper: mapper, recheck: controller.DiscoveryLookup(disc)}, nil
}

// apply makes the manager use the wiring's RESTMapper (the one that found the kinds
// served), and drops the cache settings of kinds not served.
func (w *apiWiring) apply(opts *ctrl.Options, scheme *runtime.Scheme) {
	opts.MapperProvider = func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return w.mapper, nil }
	w.served.TrimCache(&opts.Cache, scheme)
}

// watch is the runnable that stops the manager when what is served changes.
func (w *apiWiring) watch(interval time.Duration) *controller.WatchAPIs {
	return &controller.WatchAPIs{Lookup: w.recheck, Wired: w.served, Interval: interval}
}
