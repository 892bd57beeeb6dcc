package cluster

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Slurm's side of the cluster: srun gives every task of a job step its
// rank, the step's size, its nodes and how many tasks each node runs.
const (
	// SlurmProcIDEnv is the task's rank in the step; its presence says
	// this process was started by Slurm.
	SlurmProcIDEnv = "SLURM_PROCID"
	// SchedulerSlurm is Cluster.Scheduler of a cluster from srun's
	// environment.
	SchedulerSlurm = "slurm"
	// SlurmBasePortEnv sets the port of each node's first task (also
	// --slurm-base-port); task i on a node listens on the base plus i.
	SlurmBasePortEnv = "MESHTRAIN_SLURM_BASE_PORT"
	// SlurmResvPortsEnv holds the ports srun reserved for the step
	// (srun --resv-ports, with MpiParams=ports=… in slurm.conf): the same
	// on every node of the step, task i of a node listening on the i-th.
	SlurmResvPortsEnv = "SLURM_STEP_RESV_PORTS"
	// SlurmJobIDEnv is the job's ID, from which the base port is derived
	// when neither a base nor reserved ports are given (SlurmJobBase).
	SlurmJobIDEnv = "SLURM_JOB_ID"
	// DefaultSlurmBasePort is the base port when there is no base, no
	// reserved port and no job ID.
	DefaultSlurmBasePort = 7000
	// The ports derived from a job ID: SlurmJobPortLow +
	// SlurmJobPortStride × (ID mod SlurmJobPortSlots), a block of
	// SlurmJobPortStride ports per job below Linux's ephemeral ports
	// (32768 up), so jobs whose IDs differ by less than SlurmJobPortSlots
	// never share a port on a node (with up to SlurmJobPortStride tasks
	// per node).
	SlurmJobPortLow    = 20000
	SlurmJobPortStride = 16
	SlurmJobPortSlots  = 768
	// maxSlurmHosts bounds a node list's expansion, a tasks-per-node
	// list's and each of its counts, so a malformed "n[0-999999999]"
	// fails instead of allocating gigabytes.
	maxSlurmHosts = 1 << 16
)

// FromSlurm returns the cluster of the Slurm job step this task belongs
// to, from its environment (lookup is os.LookupEnv outside tests): rank
// SLURM_PROCID of SLURM_STEP_NUM_TASKS (or SLURM_NTASKS) workers, the
// step's nodes (SLURM_STEP_NODELIST or SLURM_JOB_NODELIST) holding
// SLURM_STEP_TASKS_PER_NODE (or SLURM_TASKS_PER_NODE) consecutive ranks
// each, as Slurm's default block distribution places them, and task i of
// a node at node:port i. There is no separate chief: rank 0 is.
//
// The ports, so that two jobs sharing a node do not meet: basePort + i
// when basePort > 0 (given by the user); else the step's reserved ports
// (SLURM_STEP_RESV_PORTS, srun --resv-ports), the i-th for task i; else
// SlurmJobBase(SLURM_JOB_ID) + i; else DefaultSlurmBasePort + i. The
// Cluster's ListenHint says which, for the error of a port in use.
//
// The Cluster keeps the invariants of Parse's. Every error starts with
// "Slurm environment" and names the variables at fault.
func FromSlurm(lookup func(string) (string, bool), basePort int) (*Cluster, error) {
	c, err := fromSlurm(lookup, basePort)
	if err != nil {
		return nil, fmt.Errorf("Slurm environment: %w", err)
	}
	return c, nil
}

// slurmEnv is the part of a task's environment FromSlurm reads.
type slurmEnv struct {
	lookup func(string) (string, bool)
}

// first returns the value of the first of names that is set and non-empty,
// and its name.
func (e slurmEnv) first(names ...string) (value, name string) {
	for _, n := range names {
		if v, ok := e.lookup(n); ok && strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v), n
		}
	}
	return "", ""
}

// count reads a non-negative integer from the first of names set; ok is
// false when none is.
func (e slurmEnv) count(names ...string) (n int, name string, ok bool, err error) {
	v, name := e.first(names...)
	if name == "" {
		return 0, "", false, nil
	}
	n, err = strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, name, false, fmt.Errorf("%s=%q: want a non-negative integer", name, v)
	}
	return n, name, true, nil
}

func fromSlurm(lookup func(string) (string, bool), basePort int) (*Cluster, error) {
	env := slurmEnv{lookup}
	rank, _, ok, err := env.count(SlurmProcIDEnv)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%s is not set: start the workers with srun inside a Slurm allocation", SlurmProcIDEnv)
	}
	world, worldVar, ok, err := env.count("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS")
	if err != nil {
		return nil, err
	}
	if !ok || world == 0 {
		return nil, errors.New("neither SLURM_STEP_NUM_TASKS nor SLURM_NTASKS is set: start the workers with srun -n N inside a Slurm allocation")
	}
	if world > MaxPeers {
		return nil, fmt.Errorf("%s=%d: more than the %d peers meshtrain runs", worldVar, world, MaxPeers)
	}
	if _, step := env.first("SLURM_STEP_ID", "SLURM_STEPID"); step == "" && world > 1 {
		return nil, fmt.Errorf("%s=%d but no SLURM_STEP_ID: this is a job's batch script, not a task of a job step; start the workers with srun meshtrain worker … (one task per worker)", worldVar, world)
	}
	if rank >= world {
		return nil, fmt.Errorf("%s=%d out of range: %s=%d (ranks 0 to %d)", SlurmProcIDEnv, rank, worldVar, world, world-1)
	}
	hosts, perNode, err := slurmLayout(env, world, worldVar)
	if err != nil {
		return nil, err
	}
	node, local := blockPlace(perNode, rank)
	if err := checkPlace(env, hosts, rank, node, local); err != nil {
		return nil, err
	}
	ports, source, err := slurmPorts(env, basePort, maxOf(perNode))
	if err != nil {
		return nil, err
	}
	var peers []string
	for i, h := range hosts {
		for j := range perNode[i] {
			peers = append(peers, net.JoinHostPort(h, strconv.Itoa(ports[j])))
		}
	}
	if peers, err = peerList(nil, peers); err != nil {
		return nil, err
	}
	job, _ := env.first(SlurmJobIDEnv)
	if job == "" {
		job = "?"
	}
	hint := fmt.Sprintf("port %d (task %d of node %s in Slurm job %s, from %s) is taken by another job or step on this node, or another program: give this job another base with --slurm-base-port (or %s), or start the step with srun --resv-ports",
		ports[local], local, hosts[node], job, source, SlurmBasePortEnv)
	return &Cluster{Peers: peers, Rank: rank, TaskType: TaskWorker, TaskIndex: rank, Scheduler: SchedulerSlurm, ListenHint: hint}, nil
}

// SlurmJobBase is the base port derived from a Slurm job ID (see
// SlurmJobPortLow).
func SlurmJobBase(jobID int) int {
	return SlurmJobPortLow + SlurmJobPortStride*(jobID%SlurmJobPortSlots)
}

// slurmPorts returns the port of each task of a node (perNode of them at
// most) and where they came from (see FromSlurm).
func slurmPorts(env slurmEnv, basePort, perNode int) (ports []int, source string, err error) {
	consecutive := func(base int, source string) ([]int, string, error) {
		if base < 1 || base+perNode-1 > 65535 {
			return nil, "", fmt.Errorf("base port %d with up to %d tasks per node: want ports in 1..65535 (set --slurm-base-port or %s)", base, perNode, SlurmBasePortEnv)
		}
		for i := range perNode {
			ports = append(ports, base+i)
		}
		return ports, source, nil
	}
	if basePort > 0 {
		return consecutive(basePort, fmt.Sprintf("the base port %d (--slurm-base-port or %s)", basePort, SlurmBasePortEnv))
	}
	if v, name := env.first(SlurmResvPortsEnv); name != "" {
		if ports, err = ExpandPorts(v); err != nil {
			return nil, "", fmt.Errorf("%s=%q: %w", name, v, err)
		}
		if len(ports) < perNode {
			return nil, "", fmt.Errorf("%s=%q reserves %d ports but a node runs up to %d tasks: reserve one per task (srun --resv-ports=%d), or give --slurm-base-port", name, v, len(ports), perNode, perNode)
		}
		return ports[:perNode], fmt.Sprintf("the step's reserved ports (%s=%s)", name, v), nil
	}
	if id, name, ok, err := env.count(SlurmJobIDEnv); err != nil {
		return nil, "", err
	} else if ok {
		if perNode > SlurmJobPortStride {
			return nil, "", fmt.Errorf("up to %d tasks per node, more than the %d ports a job's ID gives it: give --slurm-base-port (or %s), or start the step with srun --resv-ports", perNode, SlurmJobPortStride, SlurmBasePortEnv)
		}
		base := SlurmJobBase(id)
		return consecutive(base, fmt.Sprintf("the job's ID (%d + %d × (%s=%d mod %d) = %d)", SlurmJobPortLow, SlurmJobPortStride, name, id, SlurmJobPortSlots, base))
	}
	return consecutive(DefaultSlurmBasePort, fmt.Sprintf("the default base %d", DefaultSlurmBasePort))
}

// ExpandPorts expands Slurm's port list ("12000-12003,12010" is 12000,
// 12001, 12002, 12003, 12010), as SLURM_STEP_RESV_PORTS holds it.
func ExpandPorts(s string) ([]int, error) {
	var out []int
	for _, r := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(r), "-")
		if !isRange {
			hi = lo
		}
		a, errA := strconv.Atoi(lo)
		b, errB := strconv.Atoi(hi)
		if errA != nil || errB != nil || a < 1 || b > 65535 || b < a {
			return nil, fmt.Errorf("%q: want ports or ranges LO-HI in 1..65535, separated by commas", r)
		}
		if len(out)+b-a+1 > maxSlurmHosts {
			return nil, fmt.Errorf("more than %d ports", maxSlurmHosts)
		}
		for p := a; p <= b; p++ {
			out = append(out, p)
		}
	}
	return out, nil
}

// slurmLayout returns the step's hosts and how many tasks each runs,
// checked against the world size.
func slurmLayout(env slurmEnv, world int, worldVar string) (hosts []string, perNode []int, err error) {
	list, listVar := env.first("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
	if listVar == "" {
		return nil, nil, errors.New("no node list: none of SLURM_STEP_NODELIST, SLURM_JOB_NODELIST, SLURM_NODELIST is set; start the workers with srun")
	}
	if hosts, err = ExpandNodeList(list); err != nil {
		return nil, nil, fmt.Errorf("%s=%q: %w", listVar, list, err)
	}
	tpn, tpnVar := env.first("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
	switch {
	case tpnVar != "":
		if perNode, err = ExpandTasksPerNode(tpn); err != nil {
			return nil, nil, fmt.Errorf("%s=%q: %w", tpnVar, tpn, err)
		}
	case world == len(hosts):
		perNode = make([]int, world)
		for i := range perNode {
			perNode[i] = 1
		}
	default:
		return nil, nil, fmt.Errorf("neither SLURM_STEP_TASKS_PER_NODE nor SLURM_TASKS_PER_NODE is set and %s=%d tasks do not run one per node on the %d nodes of %s", worldVar, world, len(hosts), listVar)
	}
	if len(perNode) != len(hosts) {
		return nil, nil, fmt.Errorf("%s=%q counts tasks on %d nodes but %s=%q lists %d: are they from the same job step?", tpnVar, tpn, len(perNode), listVar, list, len(hosts))
	}
	if sum := sumOf(perNode); sum != world {
		return nil, nil, fmt.Errorf("%s=%q adds up to %d tasks but %s=%d: are they from the same job step?", tpnVar, tpn, sum, worldVar, world)
	}
	return hosts, perNode, nil
}

// blockPlace returns the node and the task on that node of rank under
// block distribution: node 0 runs the first perNode[0] ranks, and so on.
func blockPlace(perNode []int, rank int) (node, local int) {
	for node = range perNode {
		if rank < perNode[node] {
			return node, rank
		}
		rank -= perNode[node]
	}
	panic("cluster: rank beyond the tasks per node") // checked by the caller
}

// checkPlace checks that Slurm placed this task where block distribution
// would: SLURM_DISTRIBUTION (when the step spans several nodes),
// SLURM_NODEID, SLURMD_NODENAME and SLURM_LOCALID.
func checkPlace(env slurmEnv, hosts []string, rank, node, local int) error {
	const fix = "meshtrain maps ranks to hosts as Slurm's default block distribution places them; start the step with srun --distribution=block (or without --distribution)"
	if d, _ := env.first("SLURM_DISTRIBUTION"); len(hosts) > 1 {
		switch nodeLevel, _, _ := strings.Cut(strings.Split(d, ",")[0], ":"); nodeLevel {
		case "", "block", "*":
		default:
			return fmt.Errorf("SLURM_DISTRIBUTION=%s places tasks on the step's %d nodes otherwise: %s", d, len(hosts), fix)
		}
	}
	where := fmt.Sprintf("under block distribution rank %d is task %d of node %d (%s)", rank, local, node, hosts[node])
	if id, _, ok, err := env.count("SLURM_NODEID"); err != nil {
		return err
	} else if ok && id != node {
		return fmt.Errorf("SLURM_NODEID=%d but %s: %s", id, where, fix)
	}
	if name, _ := env.first("SLURMD_NODENAME"); name != "" && name != hosts[node] {
		return fmt.Errorf("SLURMD_NODENAME=%s but %s: %s", name, where, fix)
	}
	if id, _, ok, err := env.count("SLURM_LOCALID"); err != nil {
		return err
	} else if ok && id != local {
		return fmt.Errorf("SLURM_LOCALID=%d but %s: %s", id, where, fix)
	}
	return nil
}

func sumOf(xs []int) (s int) {
	for _, x := range xs {
		s += x
	}
	return s
}

func maxOf(xs []int) (m int) {
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// ExpandTasksPerNode expands Slurm's tasks-per-node syntax ("2(x3),1" is
// 2, 2, 2, 1): comma-separated counts, each optionally repeated with (xN).
// The tasks add up to at most MaxPeers.
func ExpandTasksPerNode(s string) ([]int, error) {
	var out []int
	tasks := 0
	for _, item := range strings.Split(s, ",") {
		count, rep := strings.TrimSpace(item), 1
		if base, r, ok := strings.Cut(count, "(x"); ok {
			r, closed := strings.CutSuffix(r, ")")
			n, err := strconv.Atoi(r)
			if !closed || err != nil || n < 1 {
				return nil, fmt.Errorf("%q: want N or N(xM) with counts from 1 to %d", item, maxSlurmHosts)
			}
			count, rep = base, n
		}
		n, err := strconv.Atoi(count)
		if err != nil || n < 1 || n > maxSlurmHosts {
			return nil, fmt.Errorf("%q: want N or N(xM) with counts from 1 to %d", item, maxSlurmHosts)
		}
		if len(out)+rep > maxSlurmHosts {
			return nil, fmt.Errorf("more than %d nodes", maxSlurmHosts)
		}
		if tasks += n * rep; tasks > MaxPeers {
			return nil, fmt.Errorf("more than %d tasks: meshtrain runs at most %d peers", MaxPeers, MaxPeers)
		}
		for range rep {
			out = append(out, n)
		}
	}
	return out, nil
}

// ExpandNodeList expands Slurm's compressed host list, in order:
// "node[01-03,07]" is node01 node02 node03 node07 (a range keeps its lower
// bound's zero padding), "a[1-2],b3" is a1 a2 b3, and several bracket
// groups in one name expand to every combination ("r[1-2]n[1-2]" is r1n1
// r1n2 r2n1 r2n2), as scontrol show hostnames prints them.
func ExpandNodeList(s string) ([]string, error) {
	items, err := splitTopLevel(s)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, item := range items {
		names, err := expandName(item, maxSlurmHosts-len(out))
		if err != nil {
			return nil, err
		}
		out = append(out, names...)
	}
	return out, nil
}

// splitTopLevel splits s at the commas outside brackets.
func splitTopLevel(s string) ([]string, error) {
	var items []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '[':
			if depth++; depth > 1 {
				return nil, fmt.Errorf("nested '[' at byte %d", i)
			}
		case ']':
			if depth--; depth < 0 {
				return nil, fmt.Errorf("']' without '[' at byte %d", i)
			}
		case ',':
			if depth == 0 {
				items, start = append(items, s[start:i]), i+1
			}
		}
	}
	if depth != 0 {
		return nil, errors.New("'[' without ']'")
	}
	items = append(items, s[start:])
	for i, it := range items {
		if items[i] = strings.TrimSpace(it); items[i] == "" {
			return nil, errors.New("an empty host name: want names separated by single commas")
		}
	}
	return items, nil
}

// expandName expands one host name with bracket groups (balanced, not
// nested), failing beyond limit names.
func expandName(item string, limit int) ([]string, error) {
	names := []string{""}
	for item != "" {
		open := strings.IndexByte(item, '[')
		if open < 0 {
			open = len(item)
		}
		for i := range names {
			names[i] += item[:open]
		}
		if open == len(item) {
			break
		}
		end := strings.IndexByte(item, ']')
		parts, err := expandRanges(item[open+1 : end])
		if err != nil {
			return nil, fmt.Errorf("%q: %w", item, err)
		}
		if len(names)*len(parts) > limit {
			return nil, fmt.Errorf("more than %d hosts", maxSlurmHosts)
		}
		var next []string
		for _, n := range names {
			for _, p := range parts {
				next = append(next, n+p)
			}
		}
		names, item = next, item[end+1:]
	}
	return names, nil
}

// expandRanges expands the inside of one bracket group: "01-03,07".
func expandRanges(s string) ([]string, error) {
	var out []string
	for _, r := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		a, errA := rangeBound(lo)
		b, errB := rangeBound(hi)
		if errA != nil || errB != nil {
			return nil, fmt.Errorf("range %q: want N or LO-HI of up to 9 digits", r)
		}
		if b < a {
			return nil, fmt.Errorf("range %q runs backwards", r)
		}
		if len(out)+b-a+1 > maxSlurmHosts {
			return nil, fmt.Errorf("more than %d hosts", maxSlurmHosts)
		}
		for n := a; n <= b; n++ {
			out = append(out, fmt.Sprintf("%0*d", len(lo), n))
		}
	}
	return out, nil
}

// rangeBound parses one bound of a range: 1 to 9 decimal digits.
func rangeBound(s string) (int, error) {
	if s == "" || len(s) > 9 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, errors.New("not a number")
	}
	return strconv.Atoi(s)
}
