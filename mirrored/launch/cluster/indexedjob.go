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
	// MaxWorkersEnv (or worker's --max-workers) lets an elastic run grow
	// to that many pods: the Job scaled up (completions and parallelism
	// raised) starts pods past MESHTRAIN_NUM_WORKERS, which join it.
	MaxWorkersEnv = "MESHTRAIN_MAX_WORKERS"
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
	most := n
	if mText, _ := lookup(MaxWorkersEnv); strings.TrimSpace(mText) != "" {
		if most, err = strconv.Atoi(strings.TrimSpace(mText)); err != nil || most < n || most > MaxPeers {
			return nil, fmt.Errorf("%s=%q: want a number from %s (%d) to %d, the most pods the Job may be scaled up to", MaxWorkersEnv, mText, NumWorkersEnv, n, MaxPeers)
		}
	}
	if idx >= most {
		return nil, fmt.Errorf("index %d out of range: %s=%d (indices 0 to %d); set it to the Job's completions (or %s to the most the Job is scaled up to)", idx, NumWorkersEnv, most, most-1, MaxWorkersEnv)
	}
	// A pod past the first n is a newcomer of a scaled-up Job: it lists
	// the pods before it and itself, and joins; the slots after the list
	// are the pods the Job may still start.
	listed := max(n, idx+1)
	workers := make([]string, most)
	for i := range workers {
		workers[i] = strings.ReplaceAll(pattern, IndexPlaceholder, strconv.Itoa(i))
	}
	peers, err := peerList(nil, workers)
	if err != nil {
		return nil, fmt.Errorf("peer pattern %q: %w", pattern, err)
	}
	return &Cluster{Peers: peers[:listed], Slots: peers[listed:], Joining: idx >= n, Rank: idx, TaskType: TaskWorker, TaskIndex: idx}, nil
}
