package webhook

import "strings"

// pointerToken escapes a map key as one token of a JSON pointer (RFC 6901): "~" and "/"
// in a key are "~0" and "~1".
var pointerToken = strings.NewReplacer("~", "~0", "/", "~1")

// AnnotationPath is the JSON pointer of the annotation key on the admitted object.
func AnnotationPath(key string) string {
	return "/metadata/annotations/" + pointerToken.Replace(key)
}

// LabelPath is the JSON pointer of the label key under the object at prefix (""
// for the admitted object itself, "/spec/template" for a pod template).
func LabelPath(prefix, key string) string {
	return prefix + "/metadata/labels/" + pointerToken.Replace(key)
}
