package main

import (
	"bytes"
	"fmt"
	"strings"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/explain"
)

// explain prints the account exactly as `kubectl batchledger explain account` does.
func (d *demo) explain(ba *v1alpha1.BatchAccount) {
	exs, err := explain.Explain(d.ctx, d.c, ba.Namespace, "account", ba.Name, 10)
	if err != nil {
		fmt.Fprintf(d.out, "    (explain: %v)\n", err)
		return
	}
	for i := range exs {
		var b bytes.Buffer
		explain.RenderText(&b, &exs[i])
		for _, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
			fmt.Fprintln(d.out, "    "+line)
		}
	}
}
