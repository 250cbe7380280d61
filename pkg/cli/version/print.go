package version

import (
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"

	buildinfo "batchledger.dev/batchledger/pkg/version"
)

// printInfo writes info in format output: one line by default, or json or yaml.
func printInfo(w io.Writer, info buildinfo.Info, output string) error {
	var b []byte
	var err error
	switch output {
	case "":
		_, err = fmt.Fprintln(w, info.String())
		return err
	case "json":
		b, err = json.MarshalIndent(info, "", "  ")
		b = append(b, '\n')
	case "yaml":
		b, err = yaml.Marshal(info)
	default:
		return fmt.Errorf("unsupported output format %q: use json or yaml", output)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
