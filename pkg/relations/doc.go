// Package relations says which Kubernetes objects belong to which BatchAccount, in one
// place for the controller, the webhooks, the CLI and the tests: the field indexes and
// their keys (which accounts name a Job or JobSet), which child Job of a JobSet a target
// means (ResolveTarget: a Job the JobSet controls, IsChildOf; labels only select the
// candidates), which Workload a target runs under (WorkloadOwner,
// NewestWorkload), which pods are succeeded index pods of a Job (SucceededIndexOf) and of a
// target under any of its identities (TargetPodIndex), which accounts capture a pod's
// result (CapturedBy), the accounts naming a Job (AccountsNamingJob) and the opt-in
// scope they give its pods (AccountsScope), the account the short-form annotations of a Job or JobSet declare
// (ShortForm) with the scope it gives (ShortFormScope), and whether the Job controller
// may still count a pod of a Job being deleted (TrackedPods).
//
// Two kinds of functions live here. Most are pure: they take objects and answer from
// their fields, and are tested with tables. The lookups take a client.Reader; they read
// accounts through the field indexes RegisterIndexes installs (IndexAccountTarget,
// IndexOwnerUID), so the reader must be the manager's cache or a fake client built with
// those indexes. The package never writes, and imports no controller, webhook or CLI
// package: they import it.
//
// Two keys are easily confused, so they have distinct types. A target key
// (v1alpha1.TargetKey, "job/<name>" or "jobset/<jobSet>/<replicatedJob>/<jobIndex>")
// names one assignment target and is recorded in the account status; its grammar is the
// API's, so that the pure account core (pkg/account, which links no client code and so
// does not import this package) shares it. An index key (IndexKey, "job/<name>" or
// "jobset/<name>") is what IndexAccountTarget maps to accounts: a whole JobSet, whatever
// child the account names.
package relations
