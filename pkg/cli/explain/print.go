package explain

import (
	"fmt"
	"io"

	"k8s.io/cli-runtime/pkg/printers"

	"batchledger.dev/batchledger/pkg/cli/explanation"
)

// WriteExplanations prints explanations as text (separated by a blank line), or as one
// Explanation in json/yaml, or an ExplanationList when there are several.
func WriteExplanations(w io.Writer, exs []explanation.Explanation, format string) error {
	if format == OutputText {
		return writeExplanations(w, exs, nil)
	}
	var p printers.ResourcePrinter = &printers.JSONPrinter{}
	if format == OutputYAML {
		p = &printers.YAMLPrinter{}
	}
	return writeExplanations(w, exs, p)
}

// writeExplanations prints explanations with p: one Explanation, or an ExplanationList
// when there are several; with no printer, as text separated by a blank line.
func writeExplanations(w io.Writer, exs []explanation.Explanation, p printers.ResourcePrinter) error {
	if p == nil {
		for i := range exs {
			if i > 0 {
				fmt.Fprintln(w)
			}
			RenderText(w, &exs[i])
		}
		return nil
	}
	list := explanation.NewExplanationList(exs)
	if len(list.Items) == 1 {
		return p.PrintObj(&list.Items[0], w)
	}
	return p.PrintObj(list, w)
}
