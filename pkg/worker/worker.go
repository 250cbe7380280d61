// Package worker is the example of how an application reports a shard result to
// batchledger: it reads the shard the pod was told (the account's assignment, which the
// pod webhook writes into the pod's annotations and the downward API hands to the
// container as BATCH_SHARD), or else resolves it from the completion index Kubernetes
// gives it and the shard list the batch declares, does the work, and writes the result JSON
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
	// EnvShard is the shard the account assigns this pod's (Job, index): give it the pod
	// annotation batchledger.dev/shard through the downward API. It wins over every
	// other way of naming the shard; empty when the annotation is absent.
	EnvShard = "BATCH_SHARD"
	// EnvAccount names the account(s) making the assignment (annotation
	// batchledger.dev/account), for the worker's logs.
	EnvAccount       = "BATCH_ACCOUNT"
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
	Index int
	// AssignedShard and Account are what the pod was told (EnvShard, EnvAccount).
	AssignedShard, Account string
	Shards                 []string
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
		AssignedShard: strings.TrimSpace(getenv(EnvShard)),
		Account:       getenv(EnvAccount),
		InputRevision: getenv(EnvInputRevision),
		ModelRevision: getenv(EnvModelRevision),
		OutputPrefix:  getenv(EnvOutputPrefix),
		Records:       100,
	}
	idx, err := strconv.Atoi(getenv(EnvIndex))
	if err != nil && c.AssignedShard == "" {
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

// Shard is the shard this worker is assigned: the one the pod was told (AssignedShard),
// else the index's position in the shard list the application gives.
func (c Config) Shard() (string, error) {
	if c.AssignedShard != "" {
		return c.AssignedShard, nil
	}
	if len(c.Shards) == 0 && c.ShardPrefix == "" {
		return "", fmt.Errorf("%s is empty: the pod has no batchledger.dev/shard annotation (no BatchAccount assigned this Job's index when the pod was created, or the batchledger webhook was unreachable), and neither %s nor %s gives a fallback", EnvShard, EnvShards, EnvShardPrefix)
	}
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
