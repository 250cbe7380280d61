package ledgerkey

import (
	"context"
	"encoding/json"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func chunk() *v1alpha1.ShardResults {
	return &v1alpha1.ShardResults{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "acct-uid-0", UID: "chunk-uid", ResourceVersion: "3",
			CreationTimestamp: metav1.NewTime(now)},
		Account: "acct", AccountUID: "acct-uid", FirstOrdinal: 0,
		Results: []v1alpha1.RecordedResult{{Ordinal: 0, Shard: "A", Target: "job/j", JobUID: "j-uid", Index: 0, Pod: "j-0",
			PodUID: "p0", InputRevision: "D", ModelRevision: "m", Output: "s3://b/A", Digest: "sha256:a", Records: 10, Valid: 10,
			RecordedAt: metav1.NewTime(now.Add(1234 * time.Microsecond)), Sequence: 1}},
		DroppedPods: []types.UID{"p9"},
	}
}

func mustKey(t *testing.T, cutoff time.Time) *Key {
	t.Helper()
	k, _, err := Generate(cutoff)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestVerify: a chunk the key signed verifies after the trip through the API server
// (JSON, times cut to seconds, invalid UTF-8 coerced); any change of what the verdict
// reads, another key, or no signature (after the cutoff) does not.
func TestVerify(t *testing.T) {
	key := mustKey(t, now)
	cases := []struct {
		name string
		// before changes the chunk before it is signed (by sign, the key when nil), after
		// once it was.
		before, after func(c *v1alpha1.ShardResults)
		sign          *Key
		want          Verdict
	}{
		{name: "signed", want: Signed},
		{name: "invalid UTF-8 in a message", before: func(c *v1alpha1.ShardResults) { c.Results[0].RejectMessage = "bad \xff\xfe bytes" }, want: Signed},
		{name: "valid raised", after: func(c *v1alpha1.ShardResults) { c.Results[0].Valid = 11 }, want: Tampered},
		{name: "output edited", after: func(c *v1alpha1.ShardResults) { c.Results[0].Output = "s3://x" }, want: Tampered},
		{name: "a result added", after: func(c *v1alpha1.ShardResults) { c.Results = append(c.Results, c.Results[0]) }, want: Tampered},
		{name: "renamed", after: func(c *v1alpha1.ShardResults) { c.Name = "acct-uid-0-1" }, want: Tampered},
		{name: "moved to another account", after: func(c *v1alpha1.ShardResults) { c.AccountUID = "other" }, want: Tampered},
		{name: "a dropped pod added", after: func(c *v1alpha1.ShardResults) { c.DroppedPods = append(c.DroppedPods, "held-pod") }, want: Tampered},
		{name: "another key", sign: mustKey(t, now), want: OtherKey},
		{name: "unsigned, created at the cutoff", after: func(c *v1alpha1.ShardResults) { delete(c.Annotations, AnnotationSignature) }, want: Unsigned},
		{name: "unsigned, created before the cutoff", after: func(c *v1alpha1.ShardResults) {
			delete(c.Annotations, AnnotationSignature)
			c.CreationTimestamp = metav1.NewTime(now.Add(-time.Second))
		}, want: Legacy},
		{name: "unsigned, no creation time", after: func(c *v1alpha1.ShardResults) {
			delete(c.Annotations, AnnotationSignature)
			c.CreationTimestamp = metav1.Time{}
		}, want: Unsigned},
		{name: "garbage signature", after: func(c *v1alpha1.ShardResults) { c.Annotations[AnnotationSignature] = "x" }, want: OtherKey},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := chunk()
			if tc.before != nil {
				tc.before(c)
			}
			signer := key
			if tc.sign != nil {
				signer = tc.sign
			}
			signer.Sign(c)
			if tc.after != nil {
				tc.after(c)
			}
			// As the API server stores and returns it.
			b, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			var back v1alpha1.ShardResults
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if got := key.Verify(&back); got != tc.want {
				t.Errorf("Verify = %s, want %s", got, tc.want)
			}
			if got := key.Verify(&back).Trusted(); got != (tc.want == Signed || tc.want == Legacy) {
				t.Errorf("Trusted = %v", got)
			}
		})
	}
}

// TestEncodeCoversEveryField: every field of a recorded result changes the encoding, so a
// field added to RecordedResult is either signed or fails here.
func TestEncodeCoversEveryField(t *testing.T) {
	base := Encode(chunk())
	rt := reflect.TypeOf(v1alpha1.RecordedResult{})
	for i := range rt.NumField() {
		c := chunk()
		f := reflect.ValueOf(&c.Results[0]).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Int32, reflect.Int64:
			f.SetInt(f.Int() + 1)
		case reflect.Struct: // metav1.Time
			c.Results[0].RecordedAt = metav1.NewTime(c.Results[0].RecordedAt.Add(time.Second))
		default:
			t.Fatalf("field %s of kind %s: teach Encode and this test about it", rt.Field(i).Name, f.Kind())
		}
		if string(Encode(c)) == string(base) {
			t.Errorf("RecordedResult.%s is not signed", rt.Field(i).Name)
		}
	}
	for name, change := range map[string]func(*v1alpha1.ShardResults){
		"namespace":    func(c *v1alpha1.ShardResults) { c.Namespace = "other" },
		"name":         func(c *v1alpha1.ShardResults) { c.Name = "other" },
		"account":      func(c *v1alpha1.ShardResults) { c.Account = "other" },
		"accountUID":   func(c *v1alpha1.ShardResults) { c.AccountUID = "other" },
		"firstOrdinal": func(c *v1alpha1.ShardResults) { c.FirstOrdinal = 256 },
		"droppedPods":  func(c *v1alpha1.ShardResults) { c.DroppedPods = nil },
	} {
		c := chunk()
		change(c)
		if string(Encode(c)) == string(base) {
			t.Errorf("%s is not signed", name)
		}
	}
}

// counting is a fake API server that counts Secret creates and updates.
func counting(t *testing.T, objs ...client.Object) (client.WithWatch, *atomic.Int32) {
	t.Helper()
	var writes atomic.Int32
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			err := c.Create(ctx, obj, opts...)
			if err == nil {
				writes.Add(1)
			}
			return err
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			err := c.Update(ctx, obj, opts...)
			if err == nil {
				writes.Add(1)
			}
			return err
		},
	}).Build()
	return c, &writes
}

// TestLoadOnceUnderConcurrentStarts: replicas starting together, with the Secret missing
// or created empty by the install, write the key once and all load the same key; a key
// present is used as it is, and a malformed one is refused, never replaced.
func TestLoadOnceUnderConcurrentStarts(t *testing.T) {
	meta := metav1.ObjectMeta{Namespace: "batchledger-system", Name: DefaultSecretName}
	existing, b, err := Generate(now)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		secret     *corev1.Secret
		wantWrites int32
		wantID     string
		wantErr    bool
		// wantSince is the index-pod cutoff written (with wantWrites): none for a Secret
		// that held no key, since no earlier version held a pod with it.
		wantSince time.Time
	}{
		{name: "missing: created by one replica", wantWrites: 1, wantSince: MarkedFromTheStart},
		{name: "created empty by the install: filled by one replica", secret: &corev1.Secret{ObjectMeta: meta}, wantWrites: 1, wantSince: MarkedFromTheStart},
		{name: "holding a key and its cutoffs: used", secret: &corev1.Secret{ObjectMeta: meta, Data: map[string][]byte{DataKey: b,
			DataLegacyBefore: []byte(now.Format(time.RFC3339)), DataIndexPodsSince: []byte(now.Format(time.RFC3339))}}, wantID: existing.ID()},
		{name: "holding an earlier version's key: its index-pod cutoff added by one replica", secret: &corev1.Secret{ObjectMeta: meta,
			Data: map[string][]byte{DataKey: b, DataLegacyBefore: []byte(now.Add(-time.Hour).Format(time.RFC3339))}}, wantID: existing.ID(), wantWrites: 1, wantSince: now},
		{name: "holding a malformed key: refused", secret: &corev1.Secret{ObjectMeta: meta, Data: map[string][]byte{DataKey: []byte("short")}}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var objs []client.Object
			if tc.secret != nil {
				objs = append(objs, tc.secret)
			}
			c, writes := counting(t, objs...)
			const replicas = 8
			keys := make([]*Key, replicas)
			errs := make([]error, replicas)
			var wg sync.WaitGroup
			for i := range replicas {
				wg.Go(func() {
					keys[i], errs[i] = Source{Reader: c, Writer: c, Namespace: meta.Namespace, Name: meta.Name, Now: func() time.Time { return now }}.Load(context.Background())
				})
			}
			wg.Wait()
			if got := writes.Load(); got != tc.wantWrites {
				t.Errorf("%d writes of the Secret, want %d", got, tc.wantWrites)
			}
			for i := range replicas {
				if (errs[i] != nil) != tc.wantErr {
					t.Fatalf("replica %d: error %v, want an error: %v", i, errs[i], tc.wantErr)
				}
				if tc.wantErr {
					continue
				}
				if keys[i].ID() != keys[0].ID() || (tc.wantID != "" && keys[i].ID() != tc.wantID) {
					t.Errorf("replica %d loaded key %s, replica 0 %s (want %q)", i, keys[i].ID(), keys[0].ID(), tc.wantID)
				}
			}
			var sec corev1.Secret
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(&corev1.Secret{ObjectMeta: meta}), &sec); err != nil {
				if !tc.wantErr || !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
				return
			}
			if tc.wantErr && string(sec.Data[DataKey]) != "short" {
				t.Errorf("the malformed key was replaced")
			}
			if tc.wantWrites > 0 {
				if got := string(sec.Data[DataIndexPodsSince]); got != tc.wantSince.Format(time.RFC3339) {
					t.Errorf("index-pod cutoff %q, want %s", got, tc.wantSince.Format(time.RFC3339))
				}
				for i := range replicas {
					if !keys[i].IndexPodsSince.Equal(tc.wantSince) {
						t.Errorf("replica %d loaded index-pod cutoff %v, want %v", i, keys[i].IndexPodsSince, tc.wantSince)
					}
				}
			}
			if tc.wantWrites > 0 && tc.wantID == "" {
				if got := string(sec.Data[DataLegacyBefore]); got != SignedFromTheStart.Format(time.RFC3339) {
					t.Errorf("legacy cutoff %q, want %s: a generated key trusts no unsigned chunk", got, SignedFromTheStart.Format(time.RFC3339))
				}
				if !keys[0].LegacyBefore.Equal(SignedFromTheStart) {
					t.Errorf("loaded cutoff %v", keys[0].LegacyBefore)
				}
			}
		})
	}
}

// TestMarkSinceBeforeTheKey: the manager records when it began marking pods before its
// webhooks serve, in whatever state the Secret is (missing, created empty by the install,
// holding an earlier version's key, or already saying it): from the start
// (MarkedFromTheStart) for a Secret that holds no key yet, since no earlier version held
// a pod with it, else now; replicas starting together
// write it once; the key generated later keeps it, and an earlier record is never moved.
func TestMarkSinceBeforeTheKey(t *testing.T) {
	meta := metav1.ObjectMeta{Namespace: "batchledger-system", Name: DefaultSecretName}
	earlier := now.Add(-48 * time.Hour)
	_, b, err := Generate(earlier)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		secret     *corev1.Secret
		want       time.Time
		wantWrites int32
	}{
		{name: "missing: created with the cutoff alone", want: MarkedFromTheStart, wantWrites: 1},
		{name: "created empty by the install", secret: &corev1.Secret{ObjectMeta: meta}, want: MarkedFromTheStart, wantWrites: 1},
		{name: "an earlier version's key", secret: &corev1.Secret{ObjectMeta: meta, Data: map[string][]byte{DataKey: b}}, want: now, wantWrites: 1},
		{name: "already recorded", secret: &corev1.Secret{ObjectMeta: meta, Data: map[string][]byte{DataIndexPodsSince: []byte(earlier.Format(time.RFC3339))}},
			want: earlier},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []client.Object
			if tc.secret != nil {
				objs = append(objs, tc.secret)
			}
			c, writes := counting(t, objs...)
			src := Source{Reader: c, Writer: c, Namespace: meta.Namespace, Name: meta.Name, Now: func() time.Time { return now }}
			const replicas = 4
			got := make([]time.Time, replicas)
			var wg sync.WaitGroup
			for i := range replicas {
				wg.Go(func() {
					var err error
					if got[i], err = src.MarkSince(context.Background()); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			for i := range replicas {
				if !got[i].Equal(tc.want) {
					t.Errorf("replica %d: marking since %v, want %v", i, got[i], tc.want)
				}
			}
			if n := writes.Load(); n != tc.wantWrites {
				t.Errorf("%d writes of the Secret, want %d", n, tc.wantWrites)
			}
			// An hour later the key is loaded (generated if missing): the cutoff stays.
			src.Now = func() time.Time { return now.Add(time.Hour) }
			k, err := src.Load(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !k.IndexPodsSince.Equal(tc.want) {
				t.Errorf("the key loaded later says marking began %v, want %v", k.IndexPodsSince, tc.want)
			}
		})
	}
}

// TestAGeneratedKeyTrustsNoUnsignedChunk: every release signs, so when the Secret holds no
// key no chunk was recorded with it, and the key the manager generates into it trusts no
// unsigned chunk, however long before its generation the chunk was created (the install's
// empty Secret filled when the manager first leads, hours later; a Secret deleted and
// created again). A key already there keeps the cutoff written beside it; one provided
// without a cutoff (no release writes such a key) trusts no unsigned chunk either.
func TestAGeneratedKeyTrustsNoUnsignedChunk(t *testing.T) {
	meta := metav1.ObjectMeta{Namespace: "batchledger-system", Name: DefaultSecretName}
	created := now.Add(-time.Hour) // the unsigned chunk's creationTimestamp
	_, b, err := Generate(now)
	if err != nil {
		t.Fatal(err)
	}
	stamp := func(t time.Time) []byte { return []byte(t.Format(time.RFC3339)) }
	for _, tc := range []struct {
		name   string
		secret *corev1.Secret
		want   Verdict
	}{
		{name: "missing: generated by the first leader", want: Unsigned},
		{name: "created empty by the install, first led an hour after the chunk", secret: &corev1.Secret{ObjectMeta: meta}, want: Unsigned},
		{name: "marked at the install, first led an hour after the chunk",
			secret: &corev1.Secret{ObjectMeta: meta, Data: map[string][]byte{DataIndexPodsSince: stamp(MarkedFromTheStart)}}, want: Unsigned},
		{name: "its key removed, a former cutoff left", secret: &corev1.Secret{ObjectMeta: meta,
			Data: map[string][]byte{DataLegacyBefore: stamp(now), DataIndexPodsSince: stamp(MarkedFromTheStart)}}, want: Unsigned},
		{name: "an earlier key whose cutoff is after the chunk: kept", secret: &corev1.Secret{ObjectMeta: meta,
			Data: map[string][]byte{DataKey: b, DataLegacyBefore: stamp(now), DataIndexPodsSince: stamp(now)}}, want: Legacy},
		{name: "a key provided without a cutoff, in a Secret created after the chunk", secret: &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: meta.Namespace, Name: meta.Name, CreationTimestamp: metav1.NewTime(now)},
			Data:       map[string][]byte{DataKey: b, DataIndexPodsSince: stamp(now)}}, want: Unsigned},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []client.Object
			if tc.secret != nil {
				objs = append(objs, tc.secret)
			}
			c, _ := counting(t, objs...)
			k, err := Source{Reader: c, Writer: c, Namespace: meta.Namespace, Name: meta.Name, Now: func() time.Time { return now }}.Load(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			unsigned := chunk()
			unsigned.CreationTimestamp = metav1.NewTime(created)
			if got := k.Verify(unsigned); got != tc.want {
				t.Errorf("an unsigned chunk created %v verifies %s with a key whose cutoff is %v, want %s", created, got, k.LegacyBefore, tc.want)
			}
			// A restart reads the same cutoff back.
			again, err := Source{Reader: c, Writer: c, Namespace: meta.Namespace, Name: meta.Name, Now: func() time.Time { return now.Add(time.Hour) }}.Load(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if again.ID() != k.ID() || !again.LegacyBefore.Equal(k.LegacyBefore) {
				t.Errorf("reloaded key %s cutoff %v, want %s cutoff %v", again.ID(), again.LegacyBefore, k.ID(), k.LegacyBefore)
			}
		})
	}
}
