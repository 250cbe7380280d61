package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// stopPollInterval is how often stopDeployment looks whether the manager's pods are gone.
const stopPollInterval = 2 * time.Second

// stringList is a flag that may be given several times, each value appended.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	if v == "" {
		return errors.New("empty name")
	}
	*l = append(*l, v)
	return nil
}

// parseDeployment reads --stop-deployment's NAMESPACE/NAME.
func parseDeployment(v string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(v, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, fmt.Errorf("--stop-deployment %q: want NAMESPACE/NAME", v)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// stopDeployment scales the named Deployment to 0 replicas through its scale subresource
// and waits, polling with sleep, until none of its pods is left running or timeout has
// passed. The manager adds finalizers to Jobs and pods for as long as one of its pods
// runs, also after its webhooks are gone (JobRecorder.Hold), so the release must not start
// before. A Deployment already gone is fine. Pods still running after timeout are logged
// and are no error: a pod stuck on a lost node would otherwise fail every uninstall; the
// release then runs all the same and leaves what that pod holds afterwards to `kubectl
// batchledger release`.
//
// RBAC: get of the named deployments.apps, update of its deployments/scale, list of pods
// in its namespace.
func stopDeployment(ctx context.Context, c client.Client, key types.NamespacedName, timeout time.Duration, dryRun bool,
	log logr.Logger, sleep func(context.Context, time.Duration) error) error {
	log = log.WithValues("deployment", key.String())
	var d appsv1.Deployment
	switch err := c.Get(ctx, key, &d); {
	case apierrors.IsNotFound(err):
		log.Info("the manager's Deployment is already gone")
		return nil
	case err != nil:
		return fmt.Errorf("reading Deployment %s: %w", key, err)
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return fmt.Errorf("the selector of Deployment %s: %w", key, err)
	}
	if dryRun {
		log.Info("would scale the manager's Deployment to 0 and wait for its pods to stop (dry run)", "timeout", timeout.String())
		return nil
	}
	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Spec: autoscalingv1.ScaleSpec{Replicas: 0}}
	switch err := c.SubResource("scale").Update(ctx, &d, client.WithSubResourceBody(scale)); {
	case apierrors.IsNotFound(err):
		log.Info("the manager's Deployment is already gone")
		return nil
	case err != nil:
		return fmt.Errorf("scaling Deployment %s to 0: %w", key, err)
	}
	log.Info("scaled the manager's Deployment to 0: waiting for its pods to stop, so that none holds a Job or pod after the release", "timeout", timeout.String())
	for waited := time.Duration(0); ; waited += stopPollInterval {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(key.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
			return fmt.Errorf("listing the pods of Deployment %s: %w", key, err)
		}
		var running []string
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				running = append(running, p.Name)
			}
		}
		if len(running) == 0 {
			log.Info("the manager's pods have stopped", "waited", waited.String())
			return nil
		}
		if waited >= timeout {
			log.Error(fmt.Errorf("%d pods of Deployment %s still run after %s", len(running), key, timeout),
				"releasing all the same: a Job or pod they hold from now on stays held; once they are gone, run `kubectl batchledger release --all-namespaces`",
				"pods", running)
			return nil
		}
		if err := sleep(ctx, stopPollInterval); err != nil {
			return err
		}
	}
}
