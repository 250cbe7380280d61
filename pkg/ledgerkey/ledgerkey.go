// Package ledgerkey signs the ShardResults chunks the manager records and verifies them
// when they are read back, so that the manager counts only results it recorded itself:
// a chunk that a user, an administrator or a restored backup wrote (or edited) carries
// no signature that verifies, whatever its labels and owner say.
//
// The signature is an HMAC-SHA256 over a canonical encoding of everything the verdict
// reads of a chunk (Encode), with a key only the manager reads: the Secret Source names,
// in the manager's own namespace. The key is read (or, the first time, generated) once
// per process and never replaced while the process runs: a key that changes is a change
// an administrator made, and chunks signed with the former key are then reported, not
// silently re-signed.
package ledgerkey

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// AnnotationSignature on a ShardResults chunk holds the manager's signature of its
// content: "v1.<key id>.<base64url HMAC-SHA256>".
const AnnotationSignature = "batchledger.dev/signature"

// KeyBytes is the length of a generated key; a shorter key is refused.
const KeyBytes = 32

// signatureVersion prefixes the signature and is the first element of the encoding: a
// change of what is signed is a new version, never a silent change of the bytes.
const signatureVersion = "v1"

// Key is the manager's signing key.
type Key struct {
	secret []byte
	id     string
	// LegacyBefore is when signing started: an unsigned chunk created before it was
	// written by an earlier version of the manager (see Verdict). SignedFromTheStart for
	// a key the manager generated: it trusts no unsigned chunk.
	LegacyBefore time.Time
	// IndexPodsSince is when the manager began reading results only from pods the Job
	// controller created (the pod webhooks' v1alpha1.AnnotationIndexPod mark): an
	// unmarked pod created before it was held by an earlier version, which marked none.
	IndexPodsSince time.Time
}

// NewKey returns a key of the given bytes, which must be at least KeyBytes long.
func NewKey(secret []byte, legacyBefore time.Time) (*Key, error) {
	if len(secret) < KeyBytes {
		return nil, fmt.Errorf("signing key is %d bytes; want at least %d", len(secret), KeyBytes)
	}
	sum := sha256.Sum256(append([]byte("batchledger.dev/key-id\x00"), secret...))
	return &Key{secret: append([]byte(nil), secret...), id: hex.EncodeToString(sum[:4]), LegacyBefore: legacyBefore}, nil
}

// Generate returns a new random key whose legacy cutoffs are now.
func Generate(now time.Time) (*Key, []byte, error) {
	b := make([]byte, KeyBytes)
	if _, err := rand.Read(b); err != nil {
		return nil, nil, err
	}
	k, err := NewKey(b, now)
	if k != nil {
		k.IndexPodsSince = now
	}
	return k, b, err
}

// ID names the key without revealing it (the first bytes of a hash of it): a signature
// made with another key says so.
func (k *Key) ID() string { return k.id }

// Sign sets c's signature annotation to the signature of its current content. It is
// called right before the chunk is written: any later change of the content must be
// signed again.
func (k *Key) Sign(c *v1alpha1.ShardResults) {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[AnnotationSignature] = k.signature(c)
}

func (k *Key) signature(c *v1alpha1.ShardResults) string {
	m := hmac.New(sha256.New, k.secret)
	m.Write(Encode(c))
	return signatureVersion + "." + k.id + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Verdict is what verification found of a chunk.
type Verdict string

// The verdicts. Only Signed and Legacy are trusted.
const (
	// Signed: the signature verifies with this key.
	Signed Verdict = "Signed"
	// Legacy: the chunk carries no signature and was created before the key's legacy
	// cutoff, by a version of the manager that did not sign. Trusted, and signed at its
	// next write.
	Legacy Verdict = "Legacy"
	// Unsigned: no signature, created after the cutoff: no manager that signs wrote it.
	Unsigned Verdict = "Unsigned"
	// OtherKey: signed, but with another key (the key Secret was replaced, or the chunk
	// was copied from another installation).
	OtherKey Verdict = "OtherKey"
	// Tampered: signed with this key, but its content is not what was signed.
	Tampered Verdict = "Tampered"
)

// Trusted reports whether a chunk of this verdict is counted.
func (v Verdict) Trusted() bool { return v == Signed || v == Legacy }

// Verify checks c's signature. An unsigned chunk is trusted only when its
// creationTimestamp (set by the API server, which no client can choose) is before the
// key's legacy cutoff.
func (k *Key) Verify(c *v1alpha1.ShardResults) Verdict {
	got, ok := c.Annotations[AnnotationSignature]
	if !ok || got == "" {
		if !c.CreationTimestamp.IsZero() && c.CreationTimestamp.Time.Before(k.LegacyBefore) {
			return Legacy
		}
		return Unsigned
	}
	want := k.signature(c)
	if hmac.Equal([]byte(got), []byte(want)) {
		return Signed
	}
	if parts := strings.SplitN(got, ".", 3); len(parts) != 3 || parts[0] != signatureVersion || parts[1] != k.id {
		return OtherKey
	}
	return Tampered
}

// str is s as it reads back from the API server: encoding/json (the client's, on the way
// there) writes each byte that is not valid UTF-8 as U+FFFD.
func str(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// Encode is the canonical encoding of what the verdict reads of a chunk: its namespace
// and name, the account it names (name and UID), its span, every field of every
// result (a result's worker cluster only when it has one) and the dropped pods, as one JSON array of values in a fixed order. Strings go
// through str, so the bytes are the same for the chunk written and the chunk read back
// (invalid UTF-8 is coerced as the client's encoding/json coerces it on the way to the
// API server; times are whole seconds in UTC, as metav1.Time stores them).
//
// Not signed: labels, owner references and accountUID's agreement with them are
// checked beside the signature (the account UID itself is signed); metadata the API
// server keeps (UID, resourceVersion, creationTimestamp), so a chunk restored from a
// backup under a new UID still verifies.
func Encode(c *v1alpha1.ShardResults) []byte {
	results := make([][]any, len(c.Results))
	for i, r := range c.Results {
		results[i] = []any{r.Ordinal, str(r.Shard), str(r.Target), str(string(r.JobUID)), r.Index, str(r.Pod), str(string(r.PodUID)),
			str(r.InputRevision), str(r.ModelRevision), str(r.Output), str(r.Digest), r.Records, r.Valid,
			str(r.RejectReason), str(r.RejectMessage), r.RecordedAt.UTC().Truncate(time.Second).Unix(), r.Sequence,
			str(r.RuleDigest)}
		if r.Cluster != "" {
			// Last, and only when set: the chunks signed before it existed verify as they were.
			results[i] = append(results[i], str(r.Cluster))
		}
	}
	dropped := make([]string, len(c.DroppedPods))
	for i, uid := range c.DroppedPods {
		dropped[i] = str(string(uid))
	}
	b, err := json.Marshal([]any{"batchledger.dev/ShardResults", signatureVersion,
		str(c.Namespace), str(c.Name), str(c.Account), str(string(c.AccountUID)), c.FirstOrdinal, results, dropped})
	if err != nil {
		// Only strings, integers and slices of them: json.Marshal cannot fail.
		panic(fmt.Sprintf("encoding ShardResults %s: %v", c.Name, err))
	}
	return b
}
