package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/kinds/all"
)

// The manager needs the core APIs (pods, Jobs, events, Leases) and its own CRDs
// (BatchAccount, ShardResults) and stops without them. Every other API it follows is
// optional: the cluster may not serve it (its CRDs not installed), and the manager then
// runs without the watches, caches, indexes and controllers of that kind instead of
// exiting, since an exit would leave the fail-closed pod webhook without a server and
// refuse the results scope's pods cluster-wide.
//
// What is served is asked once, at start-up (DiscoverAPIs), before the manager and its
// caches are built: the cache options, the field indexes and the controllers all follow
// that answer. WatchAPIs then asks again periodically and stops the manager with
// ErrServedAPIsChanged when the answer changes (JobSet installed after batchledger, or
// removed), so that the next start is wired for it.

// OptionalAPI is an API the manager follows only when the cluster serves it.
type OptionalAPI struct {
	GVK schema.GroupVersionKind
	// Enables says, for the start-up log, what the manager does with it.
	Enables string
}

// String is the API as the account's APINotServed names it: "jobset.x-k8s.io/v1alpha2 JobSet".
func (a OptionalAPI) String() string { return a.GVK.GroupVersion().String() + " " + a.GVK.Kind }

var (
	// APIWorkload: Kueue's Workloads, their admission in the account and the verdict
	// conditions published on them. Accounts of Jobs work without it (Admitted is then
	// Unknown, NoWorkload).
	APIWorkload = OptionalAPI{GVK: kueue.GroupVersion.WithKind("Workload"),
		Enables: "Kueue admission of targets and the verdict conditions on Workloads"}
)

// OptionalAPIs are the optional APIs the manager asks about: those of the kinds of target
// whose API is optional (kinds.Kind.OptionalAPI: JobSet, TrainJob), then Kueue's.
var OptionalAPIs = append(kindAPIs(), APIWorkload)

// KindAPI is the optional API of a kind of target.
func KindAPI(k kinds.Kind) OptionalAPI {
	return OptionalAPI{GVK: k.Object(), Enables: fmt.Sprintf("%s targets, the %s short form and the watch of %ss ending", k.Object().Kind, k.Object().Kind, k.Object().Kind)}
}

func kindAPIs() []OptionalAPI {
	var out []OptionalAPI
	for _, k := range all.Kinds {
		if k.OptionalAPI() {
			out = append(out, KindAPI(k))
		}
	}
	return out
}

// unservedAPI is the first optional API a target's kind needs (its Object's, then those
// it reads beyond it: kinds.Needing) that apis does not serve; false when every one is
// served, or the kind's API is always served (batch/v1 Job).
func unservedAPI(apis *ServedAPIs, ref v1alpha1.TargetRef) (OptionalAPI, bool) {
	k := all.Kinds.For(ref)
	if k == nil {
		return OptionalAPI{}, false
	}
	gvks := []schema.GroupVersionKind{k.Object()}
	if n, ok := k.(kinds.Needing); ok {
		gvks = append(gvks, n.Needs()...)
	}
	for _, gvk := range gvks {
		i := slices.IndexFunc(OptionalAPIs, func(a OptionalAPI) bool { return a.GVK == gvk })
		if i >= 0 && !apis.Served(OptionalAPIs[i]) {
			return OptionalAPIs[i], true
		}
	}
	return OptionalAPI{}, false
}

// ServedAPIs is which optional APIs the cluster served when the manager started. A nil
// *ServedAPIs serves everything: the unit tests' fake clients know every kind.
type ServedAPIs struct {
	apis   []OptionalAPI
	served map[schema.GroupVersionKind]bool
}

// NewServedAPIs is the set in which exactly the listed APIs of apis are served.
func NewServedAPIs(apis []OptionalAPI, served ...OptionalAPI) *ServedAPIs {
	s := &ServedAPIs{apis: slices.Clone(apis), served: map[schema.GroupVersionKind]bool{}}
	for _, a := range served {
		s.served[a.GVK] = true
	}
	return s
}

// Served reports whether api is served. An API that is not optional is always served.
func (s *ServedAPIs) Served(api OptionalAPI) bool { return s.ServedKind(api.GVK) }

// ServedKind reports whether the kind is served: false only for an optional API the
// cluster did not serve.
func (s *ServedAPIs) ServedKind(gvk schema.GroupVersionKind) bool {
	if s == nil || s.served[gvk] {
		return true
	}
	return !slices.ContainsFunc(s.apis, func(a OptionalAPI) bool { return a.GVK == gvk })
}

// ServedObject is ServedKind for obj's kind, by scheme. An object the scheme does not
// know is reported served: using it fails where it is used, as before.
func (s *ServedAPIs) ServedObject(obj runtime.Object, scheme *runtime.Scheme) bool {
	if s == nil {
		return true
	}
	gvk, err := apiutil.GVKForObject(obj, scheme)
	return err != nil || s.ServedKind(gvk)
}

// NotServed are the optional APIs not served, in the order of the list asked about.
func (s *ServedAPIs) NotServed() []OptionalAPI {
	if s == nil {
		return nil
	}
	var out []OptionalAPI
	for _, a := range s.apis {
		if !s.served[a.GVK] {
			out = append(out, a)
		}
	}
	return out
}

// Equal reports whether s and o serve the same optional APIs.
func (s *ServedAPIs) Equal(o *ServedAPIs) bool {
	return slices.Equal(apiNames(s.NotServed()), apiNames(o.NotServed()))
}

// String lists the APIs not served, for logs: "all served" or "not served: ...".
func (s *ServedAPIs) String() string {
	if ns := s.NotServed(); len(ns) > 0 {
		return "not served: " + strings.Join(apiNames(ns), ", ")
	}
	return "all served"
}

func apiNames(apis []OptionalAPI) []string {
	out := make([]string, len(apis))
	for i, a := range apis {
		out[i] = a.String()
	}
	return out
}

// Lookup says whether the cluster serves a kind: true or false, or an error when it
// cannot tell (the API server did not answer).
type Lookup func(gvk schema.GroupVersionKind) (bool, error)

// MapperLookup asks a RESTMapper: the manager's own, so that a kind found served is one
// its caches can map. A NoMatch error is an API not served. controller-runtime's dynamic
// mapper asks the API server again for a kind it does not know, but keeps a kind it once
// found: it sees an API appear, never go.
func MapperLookup(mapper meta.RESTMapper) Lookup {
	return func(gvk schema.GroupVersionKind) (bool, error) {
		_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		switch {
		case err == nil:
			return true, nil
		case meta.IsNoMatchError(err):
			return false, nil
		}
		return false, err
	}
}

// DiscoveryLookup asks the API server's discovery for the kind's group version each time
// (one GET of /apis/<group>/<version>): it sees an API appear and go.
func DiscoveryLookup(d discovery.ServerResourcesInterface) Lookup {
	return func(gvk schema.GroupVersionKind) (bool, error) {
		list, err := d.ServerResourcesForGroupVersion(gvk.GroupVersion().String())
		switch {
		case err == nil:
			return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool {
				return r.Kind == gvk.Kind && !strings.Contains(r.Name, "/")
			}), nil
		case apierrors.IsNotFound(err):
			return false, nil
		}
		return false, err
	}
}

// DiscoverAPIs asks lookup about each of apis.
func DiscoverAPIs(lookup Lookup, apis []OptionalAPI) (*ServedAPIs, error) {
	var served []OptionalAPI
	for _, a := range apis {
		ok, err := lookup(a.GVK)
		if err != nil {
			return nil, fmt.Errorf("asking whether the cluster serves %s: %w", a, err)
		}
		if ok {
			served = append(served, a)
		}
	}
	return NewServedAPIs(apis, served...), nil
}

// DiscoverAPIsRetrying is DiscoverAPIs, asked again every interval for up to timeout
// while the API server cannot tell.
func DiscoverAPIsRetrying(ctx context.Context, lookup Lookup, apis []OptionalAPI, interval, timeout time.Duration) (*ServedAPIs, error) {
	var served *ServedAPIs
	var last error
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(context.Context) (bool, error) {
		served, last = DiscoverAPIs(lookup, apis)
		return last == nil, nil
	})
	if last != nil {
		return nil, last
	}
	return served, err
}

// MetricAPIServed is the gauge of the optional APIs served (1) or not (0), labelled api
// ("jobset.x-k8s.io/v1alpha2 JobSet").
const MetricAPIServed = "batchledger_api_served"

// Report logs which optional APIs are served, one line each, and sets the
// batchledger_api_served gauge on reg (nil: no gauge).
func (s *ServedAPIs) Report(log logr.Logger, reg prometheus.Registerer) error {
	var gauge *prometheus.GaugeVec
	if reg != nil {
		gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricAPIServed,
			Help: "Optional APIs the cluster served when the manager started (1) or not (0); the manager restarts when that changes.",
		}, []string{"api"})
		if err := reg.Register(gauge); err != nil {
			return err
		}
	}
	for _, a := range s.apis {
		v := 0.0
		if s.Served(a) {
			v = 1
			log.Info("optional API served: following it", "api", a.String(), "enables", a.Enables)
		} else {
			log.Info("optional API not served: running without it until it is installed", "api", a.String(), "disabled", a.Enables)
		}
		if gauge != nil {
			gauge.WithLabelValues(a.String()).Set(v)
		}
	}
	return nil
}

// TrimCache drops from opts the per-object settings of kinds not served: the cache
// resolves each of them when it is created, and fails on a kind it cannot map.
func (s *ServedAPIs) TrimCache(opts *cache.Options, scheme *runtime.Scheme) {
	for obj := range opts.ByObject {
		if !s.ServedObject(obj, scheme) {
			delete(opts.ByObject, obj)
		}
	}
}

// servedIndexer registers an index only on a kind that is served: registering one
// starts the kind's informer, which cannot start for a kind the cluster does not serve.
type servedIndexer struct {
	client.FieldIndexer
	apis   *ServedAPIs
	scheme *runtime.Scheme
}

func (i servedIndexer) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	if !i.apis.ServedObject(obj, i.scheme) {
		return nil
	}
	return i.FieldIndexer.IndexField(ctx, obj, field, extract)
}

// ErrServedAPIsChanged stops the manager when an optional API became served or stopped
// being served after it started: the manager is wired at start-up, so it exits, and its
// Deployment starts it again, following what is served now.
var ErrServedAPIsChanged = errors.New("the optional APIs the cluster serves changed")

// DefaultAPIRecheck is how often WatchAPIs asks discovery again.
const DefaultAPIRecheck = 30 * time.Second

// WatchAPIs asks discovery every Interval which optional APIs are served, and stops the
// manager with ErrServedAPIsChanged once the answer differs from Wired. It runs on the
// leader only: a standby's controllers are not running, and it checks at once when it
// takes over, so that replicas do not all restart together and a standby keeps serving
// the webhooks while the leader restarts.
type WatchAPIs struct {
	Lookup   Lookup
	Wired    *ServedAPIs
	Interval time.Duration
}

// Start checks at once, then every Interval. An answer that cannot be had (the API server
// not answering) is logged and asked again.
func (w *WatchAPIs) Start(ctx context.Context) error {
	log := ctrl.Log.WithName("apis")
	interval := w.Interval
	if interval <= 0 {
		interval = DefaultAPIRecheck
	}
	var changed *ServedAPIs
	_ = wait.PollUntilContextCancel(ctx, interval, true, func(context.Context) (bool, error) {
		now, err := DiscoverAPIs(w.Lookup, w.Wired.apis)
		if err != nil {
			log.V(1).Info("could not ask which optional APIs are served; asking again", "error", err.Error())
			return false, nil
		}
		if now.Equal(w.Wired) {
			return false, nil
		}
		changed = now
		return true, nil
	})
	if changed == nil {
		return nil // stopped: ctx ended
	}
	log.Info("the optional APIs served changed: exiting, to start again following them",
		"wired", w.Wired.String(), "now", changed.String())
	return ErrServedAPIsChanged
}

// NeedLeaderElection: only the leader's controllers follow the APIs.
func (w *WatchAPIs) NeedLeaderElection() bool { return true }
