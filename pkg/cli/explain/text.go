package explain

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/explanation"
	"batchledger.dev/batchledger/pkg/cli/internal/output"
)

// newTabWriter aligns columns two spaces apart, as kubectl's printers do.
func newTabWriter(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
}

// table writes rows under header, every line prefixed by indent.
func table(w io.Writer, indent string, header []string, rows [][]string) {
	tw := newTabWriter(w)
	fmt.Fprintln(tw, indent+strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, indent+strings.Join(r, "\t"))
	}
	tw.Flush()
}

// fields writes "key:  value" lines with aligned values.
func fields(w io.Writer, indent string, kv ...string) {
	tw := newTabWriter(w)
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(tw, "%s%s:\t%s\n", indent, kv[i], kv[i+1])
	}
	tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// workerOf names the worker cluster a result was recorded from, or says it was this
// cluster's own pod.
func workerOf(a explanation.AcceptedResult) string {
	if a.Cluster == "" {
		return "(this cluster)"
	}
	return a.Cluster
}

func counted(s explanation.IndexSet, noun string) string {
	if s.Indexes == "" {
		return "none"
	}
	return fmt.Sprintf("%s (%d %s)", s.Indexes, s.Count, output.Plural(s.Count, noun, noun+"es"))
}

// RenderText writes an explanation in prose and aligned tables. The output depends only
// on the explanation, so the same account always reads the same.
func RenderText(w io.Writer, ex *explanation.Explanation) {
	verdict := "NOT ACCEPTED"
	if ex.Verdict.Accepted {
		verdict = "ACCEPTED"
	}
	fmt.Fprintf(w, "BatchAccount %s/%s\n", ex.Namespace, ex.Account)
	status := fmt.Sprintf("describes spec generation %d", ex.ObservedGeneration)
	if ex.ObservedGeneration < ex.Generation {
		status += fmt.Sprintf(" (STALE: the spec is at generation %d)", ex.Generation)
	} else {
		status += " (current)"
	}
	fields(w, "",
		"Verdict", fmt.Sprintf("%s (%s): %s", verdict, ex.Verdict.Reason, ex.Verdict.Message),
		"Revisions", fmt.Sprintf("input revision %s, model revision %s", ex.Revisions.InputRevision, ex.Revisions.ModelRevision),
		"Status", status,
	)

	fmt.Fprintf(w, "\nJobs (%d)\n", len(ex.Jobs))
	for _, j := range ex.Jobs {
		renderJob(w, &j)
	}

	renderShards(w, ex)
	renderResults(w, ex)

	if len(ex.History) == 0 {
		fmt.Fprintln(w, "\nHistory: no superseded identities")
	} else {
		fmt.Fprintf(w, "\nHistory: %d superseded %s (coverage they had; the verdict is about current identities)\n", len(ex.History), output.Plural(len(ex.History), "identity", "identities"))
		var rows [][]string
		for _, h := range ex.History {
			rows = append(rows, []string{v1alpha1.TargetKey(h.Target).Describe(), h.Job, h.UID, fmt.Sprint(h.RestartAttempt), orNone(h.CompletedIndexes), h.SupersededAt})
		}
		table(w, "  ", []string{"TARGET", "JOB", "UID", "RESTART", "COMPLETED", "SUPERSEDED AT"}, rows)
	}

	fmt.Fprintln(w, "\nConditions")
	if len(ex.Conditions) == 0 {
		fmt.Fprintln(w, "  none written yet")
	} else {
		var rows [][]string
		for _, c := range ex.Conditions {
			rows = append(rows, []string{c.Type, c.Status, c.Reason, c.Since, c.Message})
		}
		table(w, "  ", []string{"TYPE", "STATUS", "REASON", "SINCE", "MESSAGE"}, rows)
	}

	fmt.Fprintln(w, "\nWhat is still needed for acceptance")
	if len(ex.StillNeeded) == 0 {
		fmt.Fprintln(w, "  Nothing: the batch is Accepted.")
	}
	for i, n := range ex.StillNeeded {
		fmt.Fprintf(w, "  %d. %s\n", i+1, n)
	}
}

func renderJob(w io.Writer, j *explanation.JobExplanation) {
	title := j.Description
	if j.Repair {
		title += " (repair)"
	}
	fmt.Fprintf(w, "  %s\n", title)
	assigned := strings.Join(j.Assigned, "; ")
	if !j.Found && !j.Deleted {
		fields(w, "    ", "Assigned", assigned, "Job", j.Terminal.Summary)
		renderProblems(w, j.Problems)
		return
	}
	identity := fmt.Sprintf("%s, uid %s", j.Job, j.UID)
	if v1alpha1.TargetKey(j.Target).IsChild() {
		identity += fmt.Sprintf(", restart attempt %d", j.RestartAttempt)
	}
	if j.Deleted {
		identity += " (DELETED at " + j.DeletedAt + "; the record below stands)"
	}
	completed := counted(j.Completed, "index")
	if j.Membership.ResourceVersion != "" {
		completed += ", read at Job resourceVersion " + j.Membership.ResourceVersion
	}
	kv := []string{
		"Job", identity,
		"Assigned", assigned,
		"Completions", fmt.Sprint(j.Completions),
		"Success policy", j.SuccessPolicy,
		"Pod scope", j.PodScope,
		"Required", counted(j.Required, "index"),
		"Completed", completed,
		"Failed indexes", counted(j.Failed, "index"),
		"Not completed", orNone(j.NotCompleted.Indexes),
		"Attempts", j.Attempts.Summary,
		"Terminal", j.Terminal.Summary,
	}
	if wl := j.Workload; wl != nil {
		s := wl.Name + ": " + wl.Summary
		if wl.ResourceVersion != "" {
			s += " (read at resourceVersion " + wl.ResourceVersion + ")"
		}
		kv = append(kv, "Kueue Workload", s)
	} else {
		kv = append(kv, "Kueue Workload", "none observed (not queued through Kueue?)")
	}
	for i, a := range j.Admissions {
		kv = append(kv, fmt.Sprintf("Admission %d/%d", i+1, len(j.Admissions)), a.Summary)
	}
	if j.AdmissionsDropped > 0 {
		kv = append(kv, "Admissions dropped", fmt.Sprintf("%d older admissions are no longer kept", j.AdmissionsDropped))
	}
	fields(w, "    ", kv...)
	renderProblems(w, j.Problems)
}

func renderProblems(w io.Writer, problems []string) {
	for _, p := range problems {
		fmt.Fprintf(w, "    PROBLEM: %s\n", p)
	}
}

func renderShards(w io.Writer, ex *explanation.Explanation) {
	s := &ex.Shards
	if s.NotJudged {
		fmt.Fprintf(w, "\nShards: %d declared; not judged yet, coverage unknown", s.Total)
	} else {
		fmt.Fprintf(w, "\nShards: %d declared, %d covered, %d accepted", s.Total, s.Covered, s.Accepted)
	}
	if s.Missing != "" {
		fmt.Fprintf(w, "; missing %s", s.Missing)
	}
	if !ex.Results.Required {
		fmt.Fprint(w, " (results not required)")
	}
	fmt.Fprintln(w)
	if len(s.MissingShards) > 0 {
		fmt.Fprintln(w, "  Missing shards and the identities they wait for:")
		var rows [][]string
		for _, ms := range s.MissingShards {
			for i, id := range ms.WaitsFor {
				shard := ms.Shard
				if i > 0 {
					shard = ""
				}
				who := fmt.Sprintf("%s index %d", v1alpha1.TargetKey(id.Target).Describe(), id.Index)
				if id.Repair {
					who += " (repair)"
				}
				rows = append(rows, []string{shard, who, id.State})
			}
		}
		table(w, "    ", []string{"SHARD", "IDENTITY", "STATE"}, rows)
		if s.MissingMore > 0 {
			fmt.Fprintf(w, "    +%d more missing shards%s\n", s.MissingMore, howToList(ex, len(s.MissingShards)+s.MissingMore-s.MissingUnrecorded, s.MissingUnrecorded))
		}
	}
	if len(s.CoveredByRepair) > 0 {
		fmt.Fprintln(w, "  Covered by repair identities:")
		var rows [][]string
		for _, c := range s.CoveredByRepair {
			rows = append(rows, []string{c.Shard, fmt.Sprintf("%s index %d", v1alpha1.TargetKey(c.Target).Describe(), c.Index)})
		}
		table(w, "    ", []string{"SHARD", "COVERED BY"}, rows)
	}
}

// howToList says how to see the rows a table left out: a --max-rows that lists all the
// listable ones, of which unrecorded are not (the status does not keep them).
func howToList(ex *explanation.Explanation, listable, unrecorded int) string {
	cmd := fmt.Sprintf("kubectl batchledger explain account %s -n %s --max-rows=%d", ex.Account, ex.Namespace, listable)
	if unrecorded > 0 {
		return fmt.Sprintf(" (the status names only the lowest %d; `%s` lists those)", listable, cmd)
	}
	return fmt.Sprintf(" (`%s` lists them all)", cmd)
}

func renderResults(w io.Writer, ex *explanation.Explanation) {
	r := &ex.Results
	switch {
	case !r.Required:
		fmt.Fprintln(w, "\nResults: not required (spec.acceptance.requireResults is false): coverage and termination decide")
	case r.Rule != "":
		fmt.Fprintf(w, "\nResults: required, each meeting `%s`\n", r.Rule)
	default:
		fmt.Fprintln(w, "\nResults: required (no rule beyond shard and revisions)")
	}
	if r.Required {
		if len(r.Accepted) == 0 {
			fmt.Fprintln(w, "  Accepted: none yet")
		} else {
			fmt.Fprintf(w, "  Accepted (%d of %d shards):\n", ex.Shards.Accepted, ex.Shards.Total)
			ranOn, fromWorker := false, false
			for _, a := range r.Accepted {
				ranOn = ranOn || a.RanOn != ""
				fromWorker = fromWorker || a.Cluster != ""
			}
			var rows [][]string
			for _, a := range r.Accepted {
				row := []string{a.Shard, a.Identity, a.Pod, a.Digest, a.Output}
				if ranOn {
					row = append(row, orNone(a.RanOn))
				}
				if fromWorker {
					row = append(row, workerOf(a))
				}
				rows = append(rows, row)
			}
			header := []string{"SHARD", "IDENTITY", "POD", "DIGEST", "OUTPUT"}
			if ranOn {
				header = append(header, "RAN ON")
			}
			// Only when some result came from a MultiKueue worker: an account of one
			// cluster reads as it always did.
			if fromWorker {
				header = append(header, "WORKER")
			}
			table(w, "    ", header, rows)
			if r.AcceptedMore > 0 {
				fmt.Fprintf(w, "    +%d more%s\n", r.AcceptedMore, howToList(ex, len(r.Accepted)+r.AcceptedMore, 0))
			}
		}
	}
	if r.Missing > 0 {
		fmt.Fprintf(w, "  Missing results: %d (%s): covered, but their identities terminated or were deleted with no result recorded and no pod left to report one; a repair re-runs them\n",
			r.Missing, r.MissingShards)
	}
	if r.RejectedShards != "" {
		fmt.Fprintf(w, "  Only rejected results: %s: their identities completed and cannot report again; a repair re-runs them\n", r.RejectedShards)
	}
	if r.Rejected == 0 && r.Conflicts == 0 {
		if r.Required {
			fmt.Fprintln(w, "  Rejected: none")
		}
		return
	}
	fmt.Fprintf(w, "  Rejected: %d, conflicts: %d (newest kept by the account below)\n", r.Rejected, r.Conflicts)
	var rows [][]string
	for _, rj := range r.Rejections {
		rows = append(rows, []string{orNone(rj.Shard), fmt.Sprintf("%s index %d", v1alpha1.TargetKey(rj.Target).Describe(), rj.Index), rj.Pod, rj.Reason, rj.Message})
	}
	table(w, "    ", []string{"CLAIMED", "IDENTITY", "POD", "REASON", "MESSAGE"}, rows)
	if r.RejectionsMore > 0 {
		fmt.Fprintf(w, "    +%d more%s\n", r.RejectionsMore, howToList(ex, len(r.Rejections)+r.RejectionsMore, 0))
	}
}
