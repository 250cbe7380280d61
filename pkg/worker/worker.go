// Package worker is the example of how an application reports a shard result to
// batchledger: it resolves its shard from the completion index Kubernetes gives it and
// the shard list the batch declares, does the work, and writes the result JSON
// (pkg/result's schema) to its container termination message. No RBAC and no API call
// are needed: the kubelet carries the message into the pod status, where the controller
// reads it.
package worker

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"

	"batchledger.dev/batchledger/pkg/result"
)

// Environment variables a worker reads. JOB_COMPLETION_INDEX is set by the Job controller
// on every pod of an Indexed Job; the others come from the pod template.
const (
	EnvIndex         = "JOB_COMPLETION_INDEX"
	EnvShards        = "BATCH_SHARDS"         // "A,B,C,D": the shard of index i is the i-th
	EnvInputRevision = "BATCH_INPUT_REVISION" // e.g. "D"
	EnvModelRevision = "BATCH_MODEL_REVISION" // e.g. "m-2026-11"
	EnvOutputPrefix  = "BATCH_OUTPUT_PREFIX"  // e.g. "s3://batches/ij245/"
	EnvRecords       = "BATCH_RECORDS"        // records in a shard (the demo's stand-in for real input)
	// Without BATCH_SHARDS, a compact population: shard BATCH_SHARD_PREFIX<n> with
	// n = BATCH_JOB_INDEX * BATCH_INDEXES_PER_JOB + index, for the child Jobs of a JobSet
	// replicatedJob (BATCH_JOB_INDEX from the jobset.sigs.k8s.io/job-index label).
	EnvShardPrefix   = "BATCH_SHARD_PREFIX"
	EnvJobIndex      = "BATCH_JOB_INDEX"
	EnvIndexesPerJob = "BATCH_INDEXES_PER_JOB"
)

// Config is what one worker pod knows about its task.
type Config struct {
	Index  int
	Shards []string
	// ShardPrefix, JobIndex and IndexesPerJob name the shard of a compact population.
	ShardPrefix             string
	JobIndex, IndexesPerJob int
	InputRevision           string
	ModelRevision           string
	OutputPrefix            string
	Records                 int64
}

// ConfigFromEnv reads the worker's configuration from the environment.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		InputRevision: getenv(EnvInputRevision),
		ModelRevision: getenv(EnvModelRevision),
		OutputPrefix:  getenv(EnvOutputPrefix),
		Records:       100,
	}
	idx, err := strconv.Atoi(getenv(EnvIndex))
	if err != nil {
		return c, fmt.Errorf("%s=%q: not a completion index (is the Job Indexed?)", EnvIndex, getenv(EnvIndex))
	}
	c.Index = idx
	for _, s := range strings.Split(getenv(EnvShards), ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.Shards = append(c.Shards, s)
		}
	}
	c.ShardPrefix = getenv(EnvShardPrefix)
	for name, dst := range map[string]*int{EnvJobIndex: &c.JobIndex, EnvIndexesPerJob: &c.IndexesPerJob} {
		if v := getenv(name); v != "" {
			if *dst, err = strconv.Atoi(v); err != nil {
				return c, fmt.Errorf("%s=%q: %v", name, v, err)
			}
		}
	}
	if v := getenv(EnvRecords); v != "" {
		if c.Records, err = strconv.ParseInt(v, 10, 64); err != nil {
			return c, fmt.Errorf("%s=%q: %v", EnvRecords, v, err)
		}
	}
	return c, nil
}

// Shard is the shard this worker's index is assigned: the index gives the position, the
// application gives the meaning.
func (c Config) Shard() (string, error) {
	if len(c.Shards) == 0 && c.ShardPrefix != "" {
		return c.ShardPrefix + strconv.Itoa(c.JobIndex*c.IndexesPerJob+c.Index), nil
	}
	if c.Index < 0 || c.Index >= len(c.Shards) {
		return "", fmt.Errorf("index %d has no shard in %s (%d shards)", c.Index, EnvShards, len(c.Shards))
	}
	return c.Shards[c.Index], nil
}

// Process does the shard's work and returns its result. The example "inference" hashes
// the shard under both revisions, so the digest is the same on every attempt of a shard
// and differs when a revision differs.
func Process(c Config) (result.Report, error) {
	shard, err := c.Shard()
	if err != nil {
		return result.Report{}, err
	}
	sum := sha256.Sum256([]byte(shard + "\x00" + c.InputRevision + "\x00" + c.ModelRevision))
	return result.Report{
		Shard: shard, InputRevision: c.InputRevision, ModelRevision: c.ModelRevision,
		Output: c.OutputPrefix + shard, Digest: "sha256:" + hex.EncodeToString(sum[:]),
		Records: c.Records, Valid: c.Records,
	}, nil
}

// Message is the termination message reporting r.
func Message(r result.Report) (string, error) { return result.Encode(r) }

// WriteTerminationMessage writes the result where the kubelet reads it
// (terminationMessagePath, /dev/termination-log by default).
func WriteTerminationMessage(path string, r result.Report) error {
	msg, err := Message(r)
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(msg), 0o644)
}
