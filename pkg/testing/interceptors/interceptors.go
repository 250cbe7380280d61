// Package interceptors holds controller-runtime fake client interceptors shared by the
// unit tests of several packages.
package interceptors

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// CountedRightAfterFirstRead makes the first Job read return the Job as stored, then
// writes, as the Job controller would count a last success at that moment, completed
// indexes and succeeded into the stored Job: the caller holds a copy older than the
// count.
func CountedRightAfterFirstRead(completed string, succeeded int32) interceptor.Funcs {
	counted := false
	return interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if err := c.Get(ctx, key, obj, opts...); err != nil || counted {
			return err
		}
		if _, ok := obj.(*batchv1.Job); !ok {
			return nil
		}
		counted = true
		var now batchv1.Job
		if err := c.Get(ctx, key, &now); err != nil {
			return err
		}
		now.Status.CompletedIndexes, now.Status.Succeeded = completed, succeeded
		return c.Update(ctx, &now)
	}}
}
