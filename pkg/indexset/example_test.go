package indexset_test

import (
	"fmt"

	"batchledger.dev/batchledger/pkg/indexset"
)

// Newly completed indexes between two observations of a Job's status.
func ExampleSet_Difference() {
	old, _ := indexset.ParseJobStatus("0-4,8", 10)
	cur, _ := indexset.ParseJobStatus("0-6,8,9", 10)
	fmt.Println(cur.Difference(old))
	// Output: 5,6,9
}

// A corrupt status is read exactly as Kubernetes reads it, and what
// Kubernetes ignored is reported.
func ExampleParseJobStatus() {
	s, ignored := indexset.ParseJobStatus("0-2,x,7-12", 10)
	fmt.Println(s, s.Count())
	for _, msg := range ignored {
		fmt.Println(msg)
	}
	// Output:
	// 0-2,7-9 6
	// token 2 "x": "x" is not an integer (invalid syntax); Kubernetes ignores the token
	// token 3 "7-12": index 12 >= completions 10; Kubernetes truncates the range to end at 9
}

// Nth and Rank map between an index and its position among the completed
// indexes, e.g. to assign the k-th completed index to the k-th shard.
func ExampleSet_Nth() {
	s := indexset.FromIntervals(indexset.Interval{First: 10, Last: 19}, indexset.Interval{First: 30, Last: 39})
	i, _ := s.Nth(12)
	k, _ := s.Rank(i)
	fmt.Println(i, k)
	// Output: 32 12
}

func ExampleSet_String() {
	fmt.Println(indexset.Of(1, 3, 4, 5, 7), indexset.Of(3, 4), indexset.Range(0, 2).Union(indexset.Of(3)))
	// Output: 1,3-5,7 3,4 0-3
}
