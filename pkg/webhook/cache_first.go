package webhook

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheFirst gets from Cache, and from the API server (API) what Cache does not hold. The
// manager's cache holds only the Jobs labelled with a scope, so a Job created before the
// account that names it is not in it until the account's first reconcile labels it; a
// check that must see every Job an account names asks the API server then.
type CacheFirst struct {
	Cache client.Reader
	API   client.Reader
}

var _ client.Reader = CacheFirst{}

// Get reads key from the cache, and from the API server when the cache does not hold it.
func (c CacheFirst) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := c.Cache.Get(ctx, key, obj, opts...)
	if apierrors.IsNotFound(err) {
		return c.API.Get(ctx, key, obj, opts...)
	}
	return err
}

// List lists from the API server. The cache holds only the labelled Jobs, so what it
// lists may lack the one sought (a JobSet child not labelled yet, next to a labelled Job
// carrying that child's labels) without saying so.
func (c CacheFirst) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.API.List(ctx, list, opts...)
}
