package indexset

// Reference implementation for differential tests: the Kubernetes v1.35.4
// Job controller's interval code, copied verbatim from
// k8s.io/kubernetes/pkg/controller/job/indexed_job_utils.go and
// pkg/apis/batch/validation/validation.go (Copyright The Kubernetes Authors,
// Apache License 2.0) with only the klog logger removed and names prefixed
// with k8s, so tests can check ParseJobStatus against the real thing without
// importing k8s.io/kubernetes.

import (
	"fmt"
	"strconv"
	"strings"
)

type k8sInterval struct {
	First int
	Last  int
}

type k8sOrderedIntervals []k8sInterval

func (oi k8sOrderedIntervals) merge(newOi k8sOrderedIntervals) k8sOrderedIntervals {
	var result k8sOrderedIntervals
	i := 0
	j := 0
	var lastInterval *k8sInterval
	appendOrMergeWithLastInterval := func(thisInterval k8sInterval) {
		if lastInterval == nil || thisInterval.First > lastInterval.Last+1 {
			result = append(result, thisInterval)
			lastInterval = &result[len(result)-1]
		} else if lastInterval.Last < thisInterval.Last {
			lastInterval.Last = thisInterval.Last
		}
	}
	for i < len(oi) && j < len(newOi) {
		if oi[i].First < newOi[j].First {
			appendOrMergeWithLastInterval(oi[i])
			i++
		} else {
			appendOrMergeWithLastInterval(newOi[j])
			j++
		}
	}
	for i < len(oi) {
		appendOrMergeWithLastInterval(oi[i])
		i++
	}
	for j < len(newOi) {
		appendOrMergeWithLastInterval(newOi[j])
		j++
	}
	return result
}

func (oi k8sOrderedIntervals) total() int {
	var count int
	for _, iv := range oi {
		count += iv.Last - iv.First + 1
	}
	return count
}

func (oi k8sOrderedIntervals) String() string {
	var builder strings.Builder
	for _, v := range oi {
		if builder.Len() > 0 {
			builder.WriteRune(',')
		}
		builder.WriteString(strconv.Itoa(v.First))
		if v.Last > v.First {
			if v.Last == v.First+1 {
				builder.WriteRune(',')
			} else {
				builder.WriteRune('-')
			}
			builder.WriteString(strconv.Itoa(v.Last))
		}
	}
	return builder.String()
}

func (oi k8sOrderedIntervals) has(ix int) bool {
	lo := 0
	hi := len(oi)
	// Invariant: oi[hi].Last >= ix
	for hi > lo {
		mid := lo + (hi-lo)/2
		if oi[mid].Last >= ix {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if hi == len(oi) {
		return false
	}
	return oi[hi].First <= ix
}

func k8sParseIndexesFromString(indexesStr string, completions int) k8sOrderedIntervals {
	if indexesStr == "" {
		return nil
	}
	var result k8sOrderedIntervals
	var lastInterval *k8sInterval
	for _, intervalStr := range strings.Split(indexesStr, ",") {
		limitsStr := strings.Split(intervalStr, "-")
		var inter k8sInterval
		var err error
		inter.First, err = strconv.Atoi(limitsStr[0])
		if err != nil {
			continue
		}
		if inter.First >= completions {
			break
		}
		if len(limitsStr) > 1 {
			inter.Last, err = strconv.Atoi(limitsStr[1])
			if err != nil {
				continue
			}
			if inter.Last >= completions {
				inter.Last = completions - 1
			}
		} else {
			inter.Last = inter.First
		}
		if lastInterval != nil && lastInterval.Last == inter.First-1 {
			lastInterval.Last = inter.Last
		} else {
			result = append(result, inter)
			lastInterval = &result[len(result)-1]
		}
	}
	return result
}

// k8sValidateIndexesFormat is the API server's check of a changed
// status.completedIndexes.
func k8sValidateIndexesFormat(indexesStr string, completions int32) (int32, error) {
	if len(indexesStr) == 0 {
		return 0, nil
	}
	var lastIndex *int32
	var total int32
	for _, intervalStr := range strings.Split(indexesStr, ",") {
		x, y, err := k8sParseIndexInterval(intervalStr, completions)
		if err != nil {
			return 0, err
		}
		if lastIndex != nil && *lastIndex >= x {
			return 0, fmt.Errorf("non-increasing order, previous: %d, current: %d", *lastIndex, x)
		}
		total += y - x + 1
		lastIndex = &y
	}
	return total, nil
}

func k8sParseIndexInterval(intervalStr string, completions int32) (int32, int32, error) {
	limitsStr := strings.Split(intervalStr, "-")
	if len(limitsStr) > 2 {
		return 0, 0, fmt.Errorf("the fragment %q violates the requirement that an index interval can have at most two parts separated by '-'", intervalStr)
	}
	x, err := strconv.Atoi(limitsStr[0])
	if err != nil {
		return 0, 0, fmt.Errorf("cannot convert string to integer for index: %q", limitsStr[0])
	}
	if x >= int(completions) {
		return 0, 0, fmt.Errorf("too large index: %q", limitsStr[0])
	}
	if len(limitsStr) > 1 {
		y, err := strconv.Atoi(limitsStr[1])
		if err != nil {
			return 0, 0, fmt.Errorf("cannot convert string to integer for index: %q", limitsStr[1])
		}
		if y >= int(completions) {
			return 0, 0, fmt.Errorf("too large index: %q", limitsStr[1])
		}
		if x >= y {
			return 0, 0, fmt.Errorf("non-increasing order, previous: %d, current: %d", x, y)
		}
		return int32(x), int32(y), nil
	}
	return int32(x), int32(x), nil
}

// The helpers below are ours, not Kubernetes'.

// k8sEffective returns what the Job controller acts on for a status string:
// parseIndexesFromString followed by the merge every caller applies
// (calculateSucceededIndexes/calculateFailedIndexes -> withOrderedIndexes).
func k8sEffective(s string, completions int) k8sOrderedIntervals {
	return k8sParseIndexesFromString(s, completions).merge(nil)
}

// k8sWellFormed reports whether oi has no descending interval; only then is
// it a list of sets whose String and total mean what they say.
func k8sWellFormed(oi k8sOrderedIntervals) bool {
	for _, iv := range oi {
		if iv.Last < iv.First {
			return false
		}
	}
	return true
}

func fromK8s(oi k8sOrderedIntervals) []Interval {
	if len(oi) == 0 {
		return nil
	}
	out := make([]Interval, len(oi))
	for i, iv := range oi {
		out[i] = Interval(iv)
	}
	return out
}
