package v1alpha1

// ChunkLabels are the labels that select an account's ShardResults chunks: by the
// account's UID, so that an account deleted and recreated under the same name never
// adopts its predecessor's results (which garbage collection deletes with it), and any
// valid account name works (a name may be longer than a label value).
func ChunkLabels(ba *BatchAccount) map[string]string {
	return map[string]string{LabelAccountUID: string(ba.UID)}
}
