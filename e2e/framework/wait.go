package framework

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

const (
	// DefaultTimeout bounds a wait on something the control plane does by itself in seconds.
	DefaultTimeout = 60 * time.Second
	// PollInterval is short: the local API server is cheap to ask and tests are timed.
	PollInterval = 100 * time.Millisecond
)

// Eventually polls cond until it reports done, failing the test after timeout with desc and
// the last state cond described (and its last error, if any). Errors do not stop the
// polling: the API may be briefly unavailable or an object not created yet.
func Eventually(t testing.TB, timeout time.Duration, desc string, cond func() (done bool, state string, err error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var state string
	var lastErr error
	for {
		done, s, err := cond()
		if err == nil && done {
			return
		}
		if s != "" {
			state = s
		}
		lastErr = err
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("timed out after %s waiting for %s", timeout, desc)
			if state != "" {
				msg += "\nlast observed state:\n" + indent(state)
			}
			if lastErr != nil {
				msg += fmt.Sprintf("\nlast error: %v", lastErr)
			}
			t.Fatal(msg)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("test ended while waiting for %s", desc)
		case <-time.After(PollInterval):
		}
	}
}

// WaitFor re-reads obj until cond holds for it, and leaves the last read in obj. On timeout
// the failure names the object, desc, and the object's last status.
func WaitFor[T client.Object](t testing.TB, obj T, timeout time.Duration, desc string, cond func(T) bool) {
	t.Helper()
	what := describe(obj)
	Eventually(t, timeout, what+": "+desc, func() (bool, string, error) {
		if err := env.client.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
			if apierrors.IsNotFound(err) {
				return false, "not found", nil
			}
			return false, "", err
		}
		return cond(obj), StatusYAML(obj), nil
	})
}

// StatusYAML renders an object's status (or the whole object if it has none) for messages.
func StatusYAML(obj client.Object) string {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	var v any = u
	if st, ok := u["status"]; ok {
		v = map[string]any{"status": st}
	}
	data, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return string(data)
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

// sortPods orders pods by creation time, then name, so "the first pod" is well defined.
func sortPods(pods []corev1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i].CreationTimestamp, pods[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return pods[i].Name < pods[j].Name
	})
}
