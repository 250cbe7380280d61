package result

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// SchemaVersion is the only result schema this package understands. Workers write it in
// the "version" field so that a future schema can change fields without being misread.
const SchemaVersion = "batchledger.dev/v1"

// MaxMessageBytes is the kubelet's termination-message limit. The kubelet truncates a
// message at this many bytes, so a message that long may have been cut short: Decode
// rejects it as Oversized and Encode refuses to produce it.
const MaxMessageBytes = 4096

// Reasons a message is rejected before its claim is judged. They are CamelCase because
// they become the recorded rejection's reason in the account status; the API package
// names the same strings (v1alpha1.RejectionMissingResult and so on), which this package
// repeats so that it links no Kubernetes code (a test in pkg/acceptance keeps the two
// equal).
const (
	// ReasonMissing: the result container left no termination message.
	ReasonMissing = "MissingResult"
	// ReasonMalformed: the message is not a well-formed result (bad JSON, wrong field
	// types, impossible counts).
	ReasonMalformed = "Malformed"
	// ReasonOversized: the message reaches MaxMessageBytes and may have been truncated.
	ReasonOversized = "Oversized"
	// ReasonUnknownVersion: the message declares a schema version other than SchemaVersion.
	ReasonUnknownVersion = "UnknownSchemaVersion"
	// ReasonMissingField: a required field is absent or empty.
	ReasonMissingField = "MissingField"
)

// Field names of the schema, shared by the decoder, the encoder and the acceptance
// rule's CEL type (pkg/acceptance) so that the three cannot drift apart.
const (
	FieldVersion       = "version"
	FieldShard         = "shard"
	FieldInputRevision = "inputRevision"
	FieldModelRevision = "modelRevision"
	FieldOutput        = "output"
	FieldDigest        = "digest"
	FieldRecords       = "records"
	FieldValid         = "valid"
)

// knownFields are the schema's fields; anything else a worker reports goes to Extra.
var knownFields = map[string]bool{
	FieldVersion: true, FieldShard: true, FieldInputRevision: true, FieldModelRevision: true,
	FieldOutput: true, FieldDigest: true, FieldRecords: true, FieldValid: true,
}

// Report is one decoded shard result (schema SchemaVersion, documented in the package
// doc). The JSON field names are lowerCamelCase.
type Report struct {
	// Version is the schema version; Decode only returns reports of SchemaVersion.
	Version string `json:"version"`
	// Shard is the shard the worker claims to have processed.
	Shard string `json:"shard"`
	// InputRevision is the revision of the input data the worker read.
	InputRevision string `json:"inputRevision"`
	// ModelRevision is the revision of the code or model the worker ran.
	ModelRevision string `json:"modelRevision"`
	// Output locates the output (e.g. an object-store URL); optional.
	Output string `json:"output,omitempty"`
	// Digest is a content digest of the output; it tells conflicting results apart.
	Digest string `json:"digest"`
	// Records is the number of records processed.
	Records int64 `json:"records,omitempty"`
	// Valid is the number of valid records, at most Records.
	Valid int64 `json:"valid,omitempty"`
	// Extra holds every other field the worker reported, for the acceptance rule.
	// Decode stores integers as int64, other numbers as float64, objects as
	// map[string]any and arrays as []any; it is nil when there are none.
	Extra map[string]any `json:"-"`
}

// Error is a rejected result: Reason is one of the Reason constants (it becomes the
// recorded rejection's reason) and Message says what is wrong in words a worker author
// can act on.
type Error struct {
	Reason  string
	Message string
}

// Error implements error.
func (e *Error) Error() string { return e.Reason + ": " + e.Message }

func newError(reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Decode parses and verifies a termination message. On failure it returns a *Error
// whose Reason tells the class of failure: an empty message is ReasonMissing, one of
// MaxMessageBytes or more ReasonOversized, invalid JSON or field types ReasonMalformed
// (with the byte offset), another schema version ReasonUnknownVersion, an absent
// required field ReasonMissingField, and negative or inconsistent counts
// ReasonMalformed. Decode does not judge the claim itself (shard, revisions): that needs
// the account and is the account core's job.
func Decode(msg string) (*Report, error) {
	r, err := decode(msg)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// canonicalCheckBytes is the message length above which decode also checks that the
// report's canonical encoding fits MaxMessageBytes. Re-encoding drops whitespace and
// zero counts and at most doubles any token (the worst cases are U+2028/U+2029, which
// encoding/json escapes to six bytes, and short exponents such as 1e5, written 1e+05),
// so a message of at most this many bytes always fits and skips the cost of
// re-encoding.
const canonicalCheckBytes = MaxMessageBytes/2 - 1

// DecodePartial is Decode, but returns what it decoded so far with the error when the
// error comes after the fields were read (missing field, bad counts), so that a
// rejection can still be recorded against the shard the result claims.
func DecodePartial(msg string) (*Report, *Error) { return decode(msg) }

func decode(msg string) (*Report, *Error) {
	if strings.TrimSpace(msg) == "" {
		return nil, newError(ReasonMissing, "the termination message is empty: the worker must write its result (JSON, version %q) to its termination message file, /dev/termination-log by default", SchemaVersion)
	}
	if len(msg) >= MaxMessageBytes {
		return nil, newError(ReasonOversized, "the termination message is %d bytes; the kubelet truncates termination messages at %d bytes, so it may have been cut short. Keep the result under %d bytes and report large outputs by location", len(msg), MaxMessageBytes, MaxMessageBytes)
	}
	if !utf8.ValidString(msg) {
		off := invalidUTF8Offset(msg)
		return nil, newError(ReasonMalformed, "the result is not valid UTF-8 at byte %d (near %s)", off, near(msg, off))
	}
	raw, err := splitObject(msg)
	if err != nil {
		return nil, err
	}

	r := &Report{}
	// The version comes first: a message of another schema may use the other fields
	// differently, so it is rejected for its version rather than for its fields.
	if v, ok := raw[FieldVersion]; !ok || isNull(v) {
		return nil, newError(ReasonUnknownVersion, "the result has no %q field; this controller understands schema version %q", FieldVersion, SchemaVersion)
	} else if err := stringField(FieldVersion, v, &r.Version); err != nil {
		return nil, err
	} else if r.Version != SchemaVersion {
		return nil, newError(ReasonUnknownVersion, "the result has schema version %q; this controller understands only %q", r.Version, SchemaVersion)
	}
	// Fields are checked in schema order so that the same message always gets the same
	// rejection message.
	for _, f := range []struct {
		name string
		dst  *string
	}{{FieldShard, &r.Shard}, {FieldInputRevision, &r.InputRevision}, {FieldModelRevision, &r.ModelRevision}, {FieldOutput, &r.Output}, {FieldDigest, &r.Digest}} {
		if err := stringField(f.name, raw[f.name], f.dst); err != nil {
			return nil, err
		}
	}
	if err := intField(FieldRecords, raw[FieldRecords], &r.Records); err != nil {
		return nil, err
	}
	if err := intField(FieldValid, raw[FieldValid], &r.Valid); err != nil {
		return nil, err
	}
	for _, name := range extraNames(raw) {
		val, err := decodeValue(raw[name])
		if err != nil {
			return nil, newError(ReasonMalformed, "field %q: %v", name, err)
		}
		if r.Extra == nil {
			r.Extra = make(map[string]any, len(raw))
		}
		r.Extra[name] = val
	}

	var missing []string
	for _, f := range []struct {
		name, val string
	}{{FieldShard, r.Shard}, {FieldInputRevision, r.InputRevision}, {FieldModelRevision, r.ModelRevision}, {FieldDigest, r.Digest}} {
		if f.val == "" {
			missing = append(missing, strconv.Quote(f.name))
		}
	}
	switch len(missing) {
	case 0:
	case 1:
		return r, newError(ReasonMissingField, "the result has no %s field (required, non-empty)", missing[0])
	default:
		return r, newError(ReasonMissingField, "the result has no %s fields (required, non-empty)", strings.Join(missing, ", "))
	}
	if r.Records < 0 || r.Valid < 0 {
		return r, newError(ReasonMalformed, "the counts cannot be negative: records is %d, valid is %d", r.Records, r.Valid)
	}
	if r.Valid > r.Records {
		return r, newError(ReasonMalformed, "valid (%d) exceeds records (%d): valid counts the processed records that are valid", r.Valid, r.Records)
	}
	if len(msg) > canonicalCheckBytes {
		// Every accepted report can be encoded again (a controller may copy it, a test
		// round-trips it): refuse the rare message whose canonical form does not fit.
		if s, err := encodeRaw(*r); err != nil {
			return r, newError(ReasonMalformed, "%v", err)
		} else if len(s) >= MaxMessageBytes {
			return r, newError(ReasonOversized, "the result's canonical encoding is %d bytes, reaching the %d-byte termination-message limit", len(s), MaxMessageBytes)
		}
	}
	return r, nil
}

// splitObject parses msg as one JSON object and returns its members undecoded. Unlike
// json.Unmarshal into a struct it matches names exactly (not case-insensitively) and
// rejects a repeated name, so a message cannot say two things about its shard and have
// different readers believe different ones.
func splitObject(msg string) (map[string]json.RawMessage, *Error) {
	// Fast path: json.Unmarshal validates and splits in one go, and counting the
	// top-level members tells whether a name repeated. Only a message that fails gets
	// the slower token walk, which says where and what.
	if strings.HasPrefix(strings.TrimLeft(msg, " \t\r\n"), "{") {
		var raw map[string]json.RawMessage
		if err := json.Unmarshal([]byte(msg), &raw); err == nil && raw != nil && topLevelMembers(msg) == len(raw) {
			return raw, nil
		}
	}
	return splitObjectSlow(msg)
}

// topLevelMembers counts the members of the JSON object msg, which must be valid JSON:
// the commas outside strings at nesting depth 1, plus one unless the object is empty.
func topLevelMembers(msg string) int {
	depth, commas, inString, escaped, empty := 0, 0, false, false, true
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
			if depth == 1 {
				empty = false
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case ',':
			if depth == 1 {
				commas++
			}
		}
	}
	if empty {
		return 0
	}
	return commas + 1
}

// splitObjectSlow is splitObject by walking the tokens, for the exact error.
func splitObjectSlow(msg string) (map[string]json.RawMessage, *Error) {
	dec := json.NewDecoder(strings.NewReader(msg))
	tok, err := dec.Token()
	if err != nil {
		return nil, syntaxError(msg, dec, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, newError(ReasonMalformed, "the result must be a JSON object, found %s at byte 0", describeToken(tok))
	}
	raw := make(map[string]json.RawMessage, 8)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntaxError(msg, dec, err)
		}
		name, ok := tok.(string)
		if !ok { // the decoder already rejects non-string keys; keep a safe answer anyway
			return nil, newError(ReasonMalformed, "expected a field name at byte %d", dec.InputOffset())
		}
		if _, dup := raw[name]; dup {
			return nil, newError(ReasonMalformed, "field %q appears more than once (second at byte %d)", name, dec.InputOffset())
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, syntaxError(msg, dec, err)
		}
		raw[name] = v
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, syntaxError(msg, dec, err)
	}
	if tok, err := dec.Token(); err != io.EOF {
		if err != nil {
			return nil, syntaxError(msg, dec, err)
		}
		return nil, newError(ReasonMalformed, "unexpected %s after the JSON object at byte %d: the message must hold exactly one object", describeToken(tok), dec.InputOffset())
	}
	return raw, nil
}

// syntaxError turns a JSON decoding error into a Malformed rejection that says where.
func syntaxError(msg string, dec *json.Decoder, err error) *Error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		off := int(se.Offset)
		return newError(ReasonMalformed, "invalid JSON at byte %d (near %s): %v", off, near(msg, off), se)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return newError(ReasonMalformed, "the JSON ends at byte %d before the object is complete (was the message truncated?)", len(msg))
	default:
		off := int(dec.InputOffset())
		return newError(ReasonMalformed, "invalid JSON at byte %d (near %s): %v", off, near(msg, off), err)
	}
}

// near quotes the bytes around off so that a rejection shows the offending text.
func near(msg string, off int) string {
	const span = 16
	lo, hi := max(off-span, 0), min(off+span, len(msg))
	if lo > hi {
		lo = hi
	}
	// Do not split a UTF-8 sequence; quoting would show it as escapes.
	for lo > 0 && !utf8.RuneStart(msg[lo]) {
		lo--
	}
	for hi < len(msg) && !utf8.RuneStart(msg[hi]) {
		hi++
	}
	// JSON is full of double quotes: backquotes keep the excerpt readable.
	if s := msg[lo:hi]; strconv.CanBackquote(s) {
		return "`" + s + "`"
	}
	return strconv.Quote(msg[lo:hi])
}

func invalidUTF8Offset(s string) int {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return i
			}
		}
	}
	return len(s)
}

func describeToken(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		return fmt.Sprintf("%q", string(t))
	case string:
		return "a string"
	case nil:
		return "null"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}

// jsonKind names the kind of a raw JSON value for error messages.
func jsonKind(v json.RawMessage) string {
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "the number " + string(v)
	}
}

// extraNames returns the names of the members outside the schema, sorted so that the
// same message always gets the same rejection.
func extraNames(m map[string]json.RawMessage) []string {
	var names []string
	for k := range m {
		if !knownFields[k] {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	return names
}

// plainString returns the contents of a valid JSON string literal that has no escapes,
// without the cost of a general decode.
func plainString(v json.RawMessage) (string, bool) {
	if len(v) < 2 || bytes.IndexByte(v, '\\') >= 0 {
		return "", false
	}
	return string(v[1 : len(v)-1]), true
}

func isNull(v json.RawMessage) bool { return len(v) == 0 || v[0] == 'n' }

// stringField decodes a string field; absent and null leave dst empty.
func stringField(name string, v json.RawMessage, dst *string) *Error {
	if isNull(v) {
		return nil
	}
	if v[0] != '"' {
		return newError(ReasonMalformed, "field %q must be a string, found %s", name, jsonKind(v))
	}
	if s, ok := plainString(v); ok {
		*dst = s
		return nil
	}
	if err := json.Unmarshal(v, dst); err != nil {
		return newError(ReasonMalformed, "field %q: %v", name, err)
	}
	return nil
}

// intField decodes a count; absent and null leave dst zero. Only integer literals are
// accepted: 1.0 or 1e3 as a count means the worker computes counts as floats, which
// loses exactness past 2^53.
func intField(name string, v json.RawMessage, dst *int64) *Error {
	if isNull(v) {
		return nil
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return newError(ReasonMalformed, "field %q must be an integer count, found %s", name, jsonKind(v))
	}
	*dst = n
	return nil
}

// decodeValue decodes an Extra value into the types CEL can use: integers that fit
// become int64 (CEL int), other numbers float64 (CEL double).
func decodeValue(v json.RawMessage) (any, error) {
	// Scalars, the common case, without a Decoder.
	switch v[0] {
	case '"':
		if s, ok := plainString(v); ok {
			return s, nil
		}
	case 't':
		return true, nil
	case 'f':
		return false, nil
	case 'n':
		return nil, nil
	case '{', '[':
	default:
		return convertNumbers(json.Number(v))
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, err
	}
	return convertNumbers(x)
}

func convertNumbers(x any) (any, error) {
	switch t := x.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return i, nil
		}
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil {
			return nil, fmt.Errorf("the number %s is out of range", t)
		}
		return f, nil
	case map[string]any:
		for k, e := range t {
			c, err := convertNumbers(e)
			if err != nil {
				return nil, err
			}
			t[k] = c
		}
	case []any:
		for i, e := range t {
			c, err := convertNumbers(e)
			if err != nil {
				return nil, err
			}
			t[i] = c
		}
	}
	return x, nil
}

// Fields is the report as one map, the way the acceptance rule sees it: the extra
// fields, then the schema fields, which a decoded report's Extra never shadows.
func (r *Report) Fields() map[string]any {
	m := make(map[string]any, len(r.Extra)+len(knownFields))
	for k, v := range r.Extra {
		m[k] = v
	}
	m[FieldVersion] = r.Version
	m[FieldShard] = r.Shard
	m[FieldInputRevision] = r.InputRevision
	m[FieldModelRevision] = r.ModelRevision
	m[FieldOutput] = r.Output
	m[FieldDigest] = r.Digest
	m[FieldRecords] = r.Records
	m[FieldValid] = r.Valid
	return m
}

// Encode writes r as a termination message of schema SchemaVersion, for workers and
// demos. It sets Version (a report of another version is an error rather than being
// silently relabelled), writes Extra's fields after the schema's in name order, and
// fails when the message would not be accepted by Decode: a missing required field,
// impossible counts, an Extra field named like a schema field, a value JSON cannot
// carry (NaN, channels, ...), or a message of MaxMessageBytes or more, which the kubelet
// might truncate.
func Encode(r Report) (string, error) {
	if r.Version != "" && r.Version != SchemaVersion {
		return "", fmt.Errorf("result: Encode writes schema version %q, the report has version %q", SchemaVersion, r.Version)
	}
	r.Version = SchemaVersion
	s, err := encodeRaw(r)
	if err != nil {
		return "", err
	}
	if len(s) >= MaxMessageBytes {
		return "", fmt.Errorf("result: the encoded result is %d bytes; the kubelet truncates termination messages at %d bytes, so keep it under that (report large outputs by location)", len(s), MaxMessageBytes)
	}
	// Validate the way the controller will, so that a worker learns at write time.
	if _, derr := decode(s); derr != nil {
		return "", fmt.Errorf("result: the report would be rejected: %w", derr)
	}
	return s, nil
}

// encodeRaw writes r's canonical JSON without limits or validation: schema fields in
// schema order, then Extra in name order, no HTML escaping (which would only grow the
// message), floats written so that they decode as floats again.
func encodeRaw(r Report) (string, error) {
	var b bytes.Buffer
	b.Grow(256)
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	put := func(first bool, name string, v any) error {
		if !first {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(name)) // schema names are plain ASCII
		b.WriteByte(':')
		if err := enc.Encode(v); err != nil {
			return err
		}
		b.Truncate(b.Len() - 1) // Encoder appends a newline
		return nil
	}
	b.WriteByte('{')
	_ = put(true, FieldVersion, r.Version)
	_ = put(false, FieldShard, r.Shard)
	_ = put(false, FieldInputRevision, r.InputRevision)
	_ = put(false, FieldModelRevision, r.ModelRevision)
	if r.Output != "" {
		_ = put(false, FieldOutput, r.Output)
	}
	_ = put(false, FieldDigest, r.Digest)
	// Zero counts are left out, as absent counts are zero: re-encoding a message must not
	// make it longer than the worker wrote it.
	if r.Records != 0 {
		_ = put(false, FieldRecords, r.Records)
	}
	if r.Valid != 0 {
		_ = put(false, FieldValid, r.Valid)
	}
	names := make([]string, 0, len(r.Extra))
	for name := range r.Extra {
		if knownFields[name] {
			return "", fmt.Errorf("result: Extra field %q collides with the schema field of that name; set the Report field instead", name)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		v, err := normalizeFloats(r.Extra[name])
		if err != nil {
			return "", fmt.Errorf("result: Extra field %q: %w", name, err)
		}
		b.WriteByte(',')
		if err := enc.Encode(name); err != nil {
			return "", err
		}
		b.Truncate(b.Len() - 1)
		b.WriteByte(':')
		if err := enc.Encode(v); err != nil {
			return "", fmt.Errorf("result: Extra field %q: %w", name, err)
		}
		b.Truncate(b.Len() - 1)
	}
	b.WriteByte('}')
	return b.String(), nil
}

// normalizeFloats replaces floats in maps and slices of Extra with JSON numbers that
// keep a fraction or exponent, so that 3.0 is written "3.0" and decodes as a float (CEL
// double) again instead of as the integer 3 (CEL int), which a rule would see
// differently. It copies rather than mutating the caller's maps.
func normalizeFloats(x any) (any, error) {
	switch t := x.(type) {
	case float64:
		return formatFloat(t)
	case float32:
		return formatFloat(float64(t))
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			c, err := normalizeFloats(e)
			if err != nil {
				return nil, err
			}
			m[k] = c
		}
		return m, nil
	case []any:
		s := make([]any, len(t))
		for i, e := range t {
			c, err := normalizeFloats(e)
			if err != nil {
				return nil, err
			}
			s[i] = c
		}
		return s, nil
	}
	return x, nil
}

func formatFloat(f float64) (json.Number, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", fmt.Errorf("JSON cannot represent %v", f)
	}
	g := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(g, ".e") {
		g += ".0"
	}
	// The shorter form keeps re-encoding from growing a message much (1e5 would
	// otherwise become 100000.0).
	if e := strconv.FormatFloat(f, 'e', -1, 64); len(e) < len(g) {
		g = e
	}
	return json.Number(g), nil
}
