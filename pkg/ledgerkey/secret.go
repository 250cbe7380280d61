package ledgerkey

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Keys of the Secret's data.
const (
	// DataKey holds the signing key, KeyBytes random bytes.
	DataKey = "key"
	// DataLegacyBefore holds the legacy cutoff, RFC 3339: SignedFromTheStart for a key
	// the manager generated (earlier versions wrote the time they generated it, which is
	// read as it is). Absent (a key an administrator provided), SignedFromTheStart too.
	DataLegacyBefore = "legacyBefore"
	// DataIndexPodsSince holds, RFC 3339, when a manager that reads results only from
	// the pods the Job controller created first loaded the key (Key.IndexPodsSince); the
	// manager adds it to a Secret of an earlier version, and writes MarkedFromTheStart
	// into one that holds no key yet.
	DataIndexPodsSince = "indexPodsSince"
)

// MarkedFromTheStart is the DataIndexPodsSince of a Secret that held no key when the
// manager first marked pods: no earlier version ran with it (every release signs, and
// generates its key the first time it leads), so no unmarked pod is one an earlier
// version held, whenever it was created. The Unix epoch: a pod made before the install
// and pointed at a Job afterwards is not taken for a pod held before marking began.
var MarkedFromTheStart = time.Unix(0, 0).UTC()

// SignedFromTheStart is the DataLegacyBefore of a key the manager generates: the Secret
// held no key, so no earlier version recorded a chunk with it (every release signs), and
// no unsigned chunk is one an earlier version wrote, whenever it was created. The Unix
// epoch: a chunk written around the admission policy before the manager first leads (the
// install's empty Secret filled hours later, or a Secret deleted and created again) is
// not taken for an earlier version's.
var SignedFromTheStart = time.Unix(0, 0).UTC()

// DefaultSecretName is the key Secret's name as config/default renders it (namePrefix
// batchledger-) and as the Helm chart names it for a release called batchledger.
const DefaultSecretName = "batchledger-ledger-key"

// Source is where the key lives: a Secret in the manager's own namespace. The installs
// create it empty, so the manager needs no permission to create Secrets, only get and
// update on this one by name; where it may (a development cluster, the e2e tests), the
// manager creates it when it is missing.
type Source struct {
	// Reader reads the Secret from the API server (never a cache: the manager watches no
	// Secrets for this).
	Reader client.Reader
	// Writer creates or fills it.
	Writer client.Writer
	// Namespace and Name of the Secret.
	Namespace, Name string
	// Now is the clock of a generated key's legacy cutoff; nil is time.Now.
	Now func() time.Time
}

// Load returns the key the Secret holds, generating it when the Secret is missing or
// empty. Replicas that race to generate it are serialized by the API server (a create
// that finds the Secret there, an update that conflicts): the loser reads the winner's
// key, so every replica signs with the same one. A key that is present is never
// replaced: a Secret whose key is malformed is an error to fix, not to overwrite.
//
// A generated key's legacy cutoff is SignedFromTheStart: it trusts no unsigned chunk,
// since no manager that wrote chunks ran with a Secret that held no key.
func (s Source) Load(ctx context.Context) (*Key, error) {
	if s.Namespace == "" || s.Name == "" {
		return nil, errors.New("the signing key Secret needs a namespace and a name (--namespace, --ledger-key-secret)")
	}
	nn := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	for range 5 {
		var sec corev1.Secret
		err := s.Reader.Get(ctx, nn, &sec)
		switch {
		case apierrors.IsNotFound(err):
			sec = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name}, Type: corev1.SecretTypeOpaque}
			k, err := s.fill(&sec)
			if err != nil {
				return nil, err
			}
			if err := s.Writer.Create(ctx, &sec); err != nil {
				if apierrors.IsAlreadyExists(err) {
					continue // another replica created it first: read its key
				}
				return nil, fmt.Errorf("creating the signing key Secret %s: %w", nn, err)
			}
			return k, nil
		case err != nil:
			return nil, fmt.Errorf("reading the signing key Secret %s: %w", nn, err)
		}
		if len(sec.Data[DataKey]) == 0 {
			// Created empty by the install: this manager is the first to need it.
			k, err := s.fill(&sec)
			if err != nil {
				return nil, err
			}
			if err := s.Writer.Update(ctx, &sec); err != nil {
				if apierrors.IsConflict(err) {
					continue // another replica filled it first: read its key
				}
				return nil, fmt.Errorf("writing the signing key into Secret %s: %w", nn, err)
			}
			return k, nil
		}
		k, err := keyOf(&sec)
		if err != nil {
			return nil, err
		}
		if _, ok := sec.Data[DataIndexPodsSince]; !ok {
			// A key an earlier version generated, which marked no pod: the pods it held
			// were created before now.
			k.IndexPodsSince = s.now().UTC().Truncate(time.Second)
			sec.Data[DataIndexPodsSince] = []byte(k.IndexPodsSince.Format(time.RFC3339))
			if err := s.Writer.Update(ctx, &sec); err != nil {
				if apierrors.IsConflict(err) {
					continue // another replica wrote it first: read its cutoff
				}
				return nil, fmt.Errorf("writing %s into the signing key Secret %s: %w", DataIndexPodsSince, nn, err)
			}
		}
		return k, nil
	}
	return nil, fmt.Errorf("the signing key Secret %s kept changing while it was read", nn)
}

// MarkSince records in the Secret, when it does not say it yet, that the manager marks
// the pods the Job controller creates from now on (DataIndexPodsSince), and returns the
// time the Secret says. The manager calls it before its webhooks serve, so that an
// unmarked pod created since was made by someone else. A Secret with no key yet (missing,
// or created empty by the install) says MarkedFromTheStart: no earlier version held a pod
// with it. A missing Secret is created with that alone; Load generates the key into it
// later and keeps it.
func (s Source) MarkSince(ctx context.Context) (time.Time, error) {
	if s.Namespace == "" || s.Name == "" {
		return time.Time{}, errors.New("the signing key Secret needs a namespace and a name (--namespace, --ledger-key-secret)")
	}
	nn := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	for range 5 {
		// Without a key no earlier version ran with the Secret: nothing was held
		// before marking began (MarkedFromTheStart).
		since := MarkedFromTheStart
		stamp := []byte(since.Format(time.RFC3339))
		var sec corev1.Secret
		switch err := s.Reader.Get(ctx, nn, &sec); {
		case apierrors.IsNotFound(err):
			sec = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name}, Type: corev1.SecretTypeOpaque,
				Data: map[string][]byte{DataIndexPodsSince: stamp}}
			if err := s.Writer.Create(ctx, &sec); err != nil {
				if apierrors.IsAlreadyExists(err) {
					continue
				}
				return time.Time{}, fmt.Errorf("creating the signing key Secret %s: %w", nn, err)
			}
			return since, nil
		case err != nil:
			return time.Time{}, fmt.Errorf("reading the signing key Secret %s: %w", nn, err)
		}
		if t, ok, err := stampOf(&sec, DataIndexPodsSince); ok {
			return t, err
		}
		if len(sec.Data[DataKey]) > 0 {
			// An earlier version's key: the pods it held were created before now.
			since = s.now().UTC().Truncate(time.Second)
			stamp = []byte(since.Format(time.RFC3339))
		}
		if sec.Data == nil {
			sec.Data = map[string][]byte{}
		}
		sec.Data[DataIndexPodsSince] = stamp
		if err := s.Writer.Update(ctx, &sec); err != nil {
			if apierrors.IsConflict(err) {
				continue
			}
			return time.Time{}, fmt.Errorf("writing %s into the signing key Secret %s: %w", DataIndexPodsSince, nn, err)
		}
		return since, nil
	}
	return time.Time{}, fmt.Errorf("the signing key Secret %s kept changing while it was read", nn)
}

func (s Source) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// fill generates a key into sec, keeping the index-pod cutoff MarkSince wrote.
func (s Source) fill(sec *corev1.Secret) (*Key, error) {
	k, b, err := Generate(s.now().UTC().Truncate(time.Second))
	if err != nil {
		return nil, fmt.Errorf("generating the signing key: %w", err)
	}
	if sec.Data == nil {
		sec.Data = map[string][]byte{}
	}
	sec.Data[DataKey] = b
	// No key yet, so no earlier version recorded a chunk (SignedFromTheStart): not the
	// time of this first lead, which may be long after the install or come after the
	// Secret was deleted, when unsigned chunks written around the policy meanwhile
	// would count.
	k.LegacyBefore = SignedFromTheStart
	sec.Data[DataLegacyBefore] = []byte(SignedFromTheStart.Format(time.RFC3339))
	switch since, ok, err := stampOf(sec, DataIndexPodsSince); {
	case err != nil:
		return nil, err
	case ok:
		k.IndexPodsSince = since
	default:
		// No key yet, so no earlier version held a pod (MarkedFromTheStart).
		k.IndexPodsSince = MarkedFromTheStart
		sec.Data[DataIndexPodsSince] = []byte(MarkedFromTheStart.Format(time.RFC3339))
	}
	if sec.Annotations == nil {
		sec.Annotations = map[string]string{}
	}
	sec.Annotations["batchledger.dev/description"] = "Signs the ShardResults chunks batchledger records; " +
		"replacing or deleting it makes every recorded result untrusted."
	return k, nil
}

// keyOf reads the key of a Secret that holds one.
func keyOf(sec *corev1.Secret) (*Key, error) {
	cutoff, ok, err := stampOf(sec, DataLegacyBefore)
	if err != nil {
		return nil, err
	}
	if !ok {
		// Every key a release generated has its cutoff beside it: one without was put
		// there by someone else, and no earlier version recorded an unsigned chunk with it.
		cutoff = SignedFromTheStart
	}
	k, err := NewKey(sec.Data[DataKey], cutoff)
	if err != nil {
		return nil, fmt.Errorf("signing key Secret %s/%s: %w (refusing to replace it)", sec.Namespace, sec.Name, err)
	}
	if k.IndexPodsSince, _, err = stampOf(sec, DataIndexPodsSince); err != nil {
		return nil, err
	}
	return k, nil
}

// stampOf reads the RFC 3339 time the Secret holds under key; ok is false when it holds
// none.
func stampOf(sec *corev1.Secret, key string) (t time.Time, ok bool, err error) {
	v, ok := sec.Data[key]
	if !ok {
		return time.Time{}, false, nil
	}
	if t, err = time.Parse(time.RFC3339, string(v)); err != nil {
		return time.Time{}, true, fmt.Errorf("signing key Secret %s/%s: %s: %w", sec.Namespace, sec.Name, key, err)
	}
	return t, true, nil
}
