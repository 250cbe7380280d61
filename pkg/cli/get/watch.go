package get

import (
	"context"
	"errors"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// watchAccounts is get -w: it lists the accounts of namespace ("" for all; only name when
// given) that filter selects, prints them unless watchOnly, then prints each account as
// it changes (added, modified or deleted), as kubectl get -w does, until ctx ends. A
// watch the server closes is resumed from the last resourceVersion seen; one that
// expired (410 Gone) from a fresh list, whose accounts are not printed again.
func watchAccounts(ctx context.Context, c client.WithWatch, out io.Writer, p *accountPrinter, namespace, name string, filter accountFilter, printList bool) error {
	opts := filter.options(name)
	accts, rv, err := listAccounts(ctx, c, namespace, opts...)
	if err != nil {
		return err
	}
	if printList && len(accts) > 0 {
		if err := p.printEach(out, accts); err != nil {
			return err
		}
	}
	for {
		lo := &client.ListOptions{}
		lo.ApplyOptions(opts)
		lo.Namespace = namespace
		lo.Raw = &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}
		wi, err := c.Watch(ctx, &v1alpha1.BatchAccountList{}, lo)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watching BatchAccounts: %w", err)
		}
		rv, err = followAccounts(ctx, wi, out, p, rv)
		wi.Stop()
		switch {
		case ctx.Err() != nil:
			return nil
		case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
			if _, rv, err = listAccounts(ctx, c, namespace, opts...); err != nil {
				return err
			}
		case err != nil:
			return err
		}
	}
}

// followAccounts prints the accounts of a watch's events until the watch or ctx ends, and
// returns the last resourceVersion seen.
func followAccounts(ctx context.Context, wi watch.Interface, out io.Writer, p *accountPrinter, rv string) (string, error) {
	for {
		select {
		case <-ctx.Done():
			return rv, nil
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return rv, nil
			}
			switch ev.Type {
			case watch.Error:
				if st, ok := ev.Object.(*metav1.Status); ok {
					return rv, &apierrors.StatusError{ErrStatus: *st}
				}
				return rv, errors.New("the BatchAccount watch failed")
			case watch.Bookmark:
				if m, ok := ev.Object.(client.Object); ok {
					rv = m.GetResourceVersion()
				}
				continue
			}
			ba, ok := ev.Object.(*v1alpha1.BatchAccount)
			if !ok {
				continue
			}
			rv = ba.ResourceVersion
			if err := p.print(out, []v1alpha1.BatchAccount{*ba}, true); err != nil {
				return rv, err
			}
		}
	}
}

// printEach prints accounts the way a watch prints changes: one table (its header once),
// or one object after another.
func (p *accountPrinter) printEach(w io.Writer, accts []v1alpha1.BatchAccount) error {
	if p.toTable != nil {
		return p.print(w, accts, false)
	}
	for i := range accts {
		if err := p.print(w, accts[i:i+1], true); err != nil {
			return err
		}
	}
	return nil
}
