package cluster

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The environment of a Kubernetes Indexed Job's pod, the cluster source
// that needs no operator: the Job controller sets JobIndexEnv in every pod
// (0..completions-1); the manifest sets the other two, the same in every
// pod (or passes them as worker's --peer-pattern and --num-workers).
const (
	JobIndexEnv    = "JOB_COMPLETION_INDEX"
	PeerPatternEnv = "MESHTRAIN_PEER_PATTERN"
	NumWorkersEnv  = "MESHTRAIN_NUM_WORKERS"
)

// IndexPlaceholder is what a peer pattern holds in place of each pod's
// index: "train-{index}.train:7000" lists train-0.train:7000,
// train-1.train:7000, ... (an Indexed Job's pod is named <job>-<index>
// and, with subdomain set to a headless Service, resolves as
// <job>-<index>.<service>).
const IndexPlaceholder = "{index}"

// FromIndexedJob builds the cluster of an Indexed Job's pod from its
// environment (lookup is os.LookupEnv or a test's map): rank
// JOB_COMPLETION_INDEX among MESHTRAIN_NUM_WORKERS workers whose addresses
// are MESHTRAIN_PEER_PATTERN with IndexPlaceholder replaced by 0, 1, ...
// Index 0 is the chief. ok is false, with no error, when
// JOB_COMPLETION_INDEX is unset (not an Indexed Job's pod).
func FromIndexedJob(lookup func(string) (string, bool)) (c *Cluster, ok bool, err error) {
	idxText, ok := lookup(JobIndexEnv)
	if !ok {
		return nil, false, nil
	}
	c, err = fromIndexedJob(lookup, idxText)
	if err != nil {
		return nil, true, fmt.Errorf("Indexed Job (%s=%s): %w", JobIndexEnv, idxText, err)
	}
	return c, true, nil
}

func fromIndexedJob(lookup func(string) (string, bool), idxText string) (*Cluster, error) {
	pattern, _ := lookup(PeerPatternEnv)
	if pattern == "" {
		return nil, fmt.Errorf("no peer pattern: set %s (or --peer-pattern) to the peers' addresses with %s for the index, e.g. 'train-%s.train:7000' for the pods of Job train behind the headless Service train",
			PeerPatternEnv, IndexPlaceholder, IndexPlaceholder)
	}
	if !strings.Contains(pattern, IndexPlaceholder) {
		return nil, fmt.Errorf("peer pattern %q has no %s: every peer would have the same address", pattern, IndexPlaceholder)
	}
	nText, _ := lookup(NumWorkersEnv)
	n, err := strconv.Atoi(strings.TrimSpace(nText))
	if nText == "" {
		return nil, fmt.Errorf("no worker count: set %s (or --num-workers) to the Job's completions", NumWorkersEnv)
	}
	if err != nil || n < 1 || n > MaxPeers {
		return nil, fmt.Errorf("%s=%q: want a number from 1 to %d, the Job's completions", NumWorkersEnv, nText, MaxPeers)
	}
	idx, err := strconv.Atoi(strings.TrimSpace(idxText))
	if err != nil || idx < 0 {
		return nil, errors.New("want a number ≥ 0 (the Job controller sets it in every pod of a Job with completionMode: Indexed)")
	}
	if idx >= n {
		return nil, fmt.Errorf("index %d out of range: %s=%d (indices 0 to %d); set it to the Job's completions", idx, NumWorkersEnv, n, n-1)
	}
	workers := make([]string, n)
	for i := range workers {
		workers[i] = strings.ReplaceAll(pattern, IndexPlaceholder, strconv.Itoa(i))
	}
	peers, err := peerList(nil, workers)
	if err != nil {
		return nil, fmt.Errorf("peer pattern %q: %w", pattern, err)
	}
	return &Cluster{Peers: peers, Rank: idx, TaskType: TaskWorker, TaskIndex: idx}, nil
}
