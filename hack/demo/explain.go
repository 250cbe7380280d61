package main

import (
	"fmt"
	"text/tabwriter"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// explain prints the account's conditions and targets.
func (d *demo) explain(ba *v1alpha1.BatchAccount) {
	st := ba.Status
	fmt.Fprintf(d.out, "    release: input %s, model %s; shards %d covered / %d total / %d accepted; missing %q\n",
		ba.Spec.InputRevision, ba.Spec.ModelRevision, st.Shards.Covered, st.Shards.Total, st.Shards.Accepted, st.Shards.Missing)
	tw := tabwriter.NewWriter(d.out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "    TARGET\tJOB\tREQUIRED\tCOMPLETED\tATTEMPTS\tTERMINAL\tWORKLOAD")
	for _, t := range st.Targets {
		wl := ""
		if t.Workload != nil {
			wl = fmt.Sprintf("%s admitted=%v %v", t.Workload.ClusterQueue, t.Workload.Admitted, t.Workload.Flavors)
		}
		fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%d\t%s\t%s\n", t.Name, t.Job, t.Required, t.CompletedIndexes, t.SuccessfulAttempts, t.Terminal, wl)
	}
	fmt.Fprintln(tw, "    CONDITION\tSTATUS\tREASON\tMESSAGE")
	for _, c := range st.Conditions {
		fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	_ = tw.Flush()
}
