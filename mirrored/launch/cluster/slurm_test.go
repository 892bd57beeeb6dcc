package cluster

import (
	"slices"
	"strings"
	"testing"
)

func TestExpandNodeList(t *testing.T) {
	tests := []struct {
		list string
		want []string
	}{
		{"vm", []string{"vm"}},
		{"node[01-03,07]", []string{"node01", "node02", "node03", "node07"}},
		{"a[1-2],b3", []string{"a1", "a2", "b3"}},
		{"node[8-10]", []string{"node8", "node9", "node10"}},
		{"node[008-010]", []string{"node008", "node009", "node010"}},
		{"r[1-2]n[01-02]", []string{"r1n01", "r1n02", "r2n01", "r2n02"}},
		{"gpu[3]-ib,cpu[1,5]", []string{"gpu3-ib", "cpu1", "cpu5"}},
		{"10.0.0.[1-2]", []string{"10.0.0.1", "10.0.0.2"}},
		{" a , b ", []string{"a", "b"}},
	}
	for _, tt := range tests {
		got, err := ExpandNodeList(tt.list)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("ExpandNodeList(%q) = %q, %v; want %q", tt.list, got, err, tt.want)
		}
	}
}

func TestExpandNodeListErrors(t *testing.T) {
	tests := []struct{ list, want string }{
		{"", "an empty host name"},
		{"a,,b", "an empty host name"},
		{"node[1-3", "'[' without ']'"},
		{"node1-3]", "']' without '['"},
		{"n[1-[2]]", "nested '['"},
		{"node[3-1]", `range "3-1" runs backwards`},
		{"node[a-b]", `range "a-b": want N or LO-HI`},
		{"node[]", `range "": want N or LO-HI`},
		{"node[1-2-3]", `range "1-2-3": want N or LO-HI`},
		{"n[0-999999999]", "more than 65536 hosts"},
		{"a[0-999]b[0-999]", "more than 65536 hosts"},
	}
	for _, tt := range tests {
		_, err := ExpandNodeList(tt.list)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ExpandNodeList(%q): got %v, want an error saying %q", tt.list, err, tt.want)
		}
	}
}

func TestExpandTasksPerNode(t *testing.T) {
	tests := []struct {
		s    string
		want []int
		err  string
	}{
		{"3", []int{3}, ""},
		{"2(x3),1", []int{2, 2, 2, 1}, ""},
		{"1,4(x2)", []int{1, 4, 4}, ""},
		{"2(x3", nil, `"2(x3": want N or N(xM)`},
		{"0", nil, `"0": want N or N(xM)`},
		{"2(x0)", nil, `"2(x0)": want N or N(xM)`},
		{"", nil, `"": want N`},
		{"1(x70000)", nil, "more than 65536 nodes"},
		{"9223372036854775807", nil, "with counts from 1 to 65536"},
	}
	for _, tt := range tests {
		got, err := ExpandTasksPerNode(tt.s)
		if tt.err == "" && (err != nil || !slices.Equal(got, tt.want)) || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("ExpandTasksPerNode(%q) = %v, %v; want %v, error %q", tt.s, got, err, tt.want, tt.err)
		}
	}
}

// srunEnv is the environment srun gives rank procid of a step (as Slurm
// 22.05 sets it), with changes (an empty value unsets the variable).
func srunEnv(procid, localid, nodeid, node, nodelist, perNode, ntasks string, changes ...string) func(string) (string, bool) {
	env := map[string]string{
		"SLURM_PROCID": procid, "SLURM_LOCALID": localid, "SLURM_NODEID": nodeid, "SLURMD_NODENAME": node,
		"SLURM_STEP_NODELIST": nodelist, "SLURM_JOB_NODELIST": nodelist, "SLURM_STEP_TASKS_PER_NODE": perNode,
		"SLURM_TASKS_PER_NODE": perNode, "SLURM_STEP_NUM_TASKS": ntasks, "SLURM_NTASKS": ntasks, "SLURM_STEP_ID": "0",
	}
	for i := 0; i+1 < len(changes); i += 2 {
		if changes[i+1] == "" {
			delete(env, changes[i])
		} else {
			env[changes[i]] = changes[i+1]
		}
	}
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func TestFromSlurm(t *testing.T) {
	tests := []struct {
		name  string
		env   func(string) (string, bool)
		peers []string
		rank  int
	}{
		{"one node, three tasks", srunEnv("2", "2", "0", "vm", "vm", "3", "3"),
			[]string{"vm:7000", "vm:7001", "vm:7002"}, 2},
		{"blocks over nodes", srunEnv("3", "1", "1", "n02", "n[01-03]", "2(x2),1", "5"),
			[]string{"n01:7000", "n01:7001", "n02:7000", "n02:7001", "n03:7000"}, 3},
		{"the job's variables only", srunEnv("1", "", "", "", "a[1-2]", "", "2", "SLURM_STEP_NODELIST", "", "SLURM_STEP_NUM_TASKS", ""),
			[]string{"a1:7000", "a2:7000"}, 1},
		{"cyclic on one node is block", srunEnv("1", "1", "0", "vm", "vm", "2", "2", "SLURM_DISTRIBUTION", "cyclic"),
			[]string{"vm:7000", "vm:7001"}, 1},
		{"block:cyclic over nodes", srunEnv("1", "0", "1", "b", "a,b", "1(x2)", "2", "SLURM_DISTRIBUTION", "block:cyclic,Pack"),
			[]string{"a:7000", "b:7000"}, 1},
		{"a single task in a batch script", srunEnv("0", "0", "0", "vm", "vm", "1", "1", "SLURM_STEP_ID", ""),
			[]string{"vm:7000"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := FromSlurm(tt.env, DefaultSlurmBasePort)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.Peers, tt.peers) || c.Rank != tt.rank || c.TaskType != TaskWorker || c.TaskIndex != tt.rank || c.HasChief {
				t.Errorf("got %+v, want peers %q rank %d", c, tt.peers, tt.rank)
			}
		})
	}
}

// TestFromSlurmErrors is the table of every rejected environment with the
// message a user sees.
func TestFromSlurmErrors(t *testing.T) {
	tests := []struct {
		name string
		env  func(string) (string, bool)
		base int
		want string
	}{
		{"no rank", srunEnv("", "0", "0", "vm", "vm", "1", "1"), 7000, "Slurm environment: SLURM_PROCID is not set"},
		{"bad rank", srunEnv("x", "0", "0", "vm", "vm", "1", "1"), 7000, `SLURM_PROCID="x": want a non-negative integer`},
		{"no size", srunEnv("0", "0", "0", "vm", "vm", "1", "", "SLURM_NTASKS", ""), 7000, "neither SLURM_STEP_NUM_TASKS nor SLURM_NTASKS is set"},
		{"the batch script", srunEnv("0", "0", "0", "vm", "vm", "3", "3", "SLURM_STEP_ID", "", "SLURM_STEP_NUM_TASKS", ""), 7000,
			"SLURM_NTASKS=3 but no SLURM_STEP_ID: this is a job's batch script, not a task of a job step; start the workers with srun"},
		{"rank out of range", srunEnv("3", "0", "0", "vm", "vm", "3", "3"), 7000, "SLURM_PROCID=3 out of range: SLURM_STEP_NUM_TASKS=3 (ranks 0 to 2)"},
		{"no node list", srunEnv("0", "0", "0", "vm", "", "1", "1"), 7000, "no node list"},
		{"bad node list", srunEnv("0", "0", "0", "vm", "n[1-", "1", "1"), 7000, `SLURM_STEP_NODELIST="n[1-": '[' without ']'`},
		{"bad tasks per node", srunEnv("0", "0", "0", "vm", "vm", "1(x", "1"), 7000, `SLURM_STEP_TASKS_PER_NODE="1(x"`},
		{"no tasks per node, several per node", srunEnv("0", "0", "0", "vm", "vm", "", "2"), 7000,
			"neither SLURM_STEP_TASKS_PER_NODE nor SLURM_TASKS_PER_NODE is set and SLURM_STEP_NUM_TASKS=2 tasks do not run one per node on the 1 nodes"},
		{"counts for other nodes", srunEnv("0", "0", "0", "a", "a,b", "2", "2"), 7000,
			`SLURM_STEP_TASKS_PER_NODE="2" counts tasks on 1 nodes but SLURM_STEP_NODELIST="a,b" lists 2`},
		{"counts for another size", srunEnv("0", "0", "0", "a", "a,b", "2,1", "4"), 7000,
			`SLURM_STEP_TASKS_PER_NODE="2,1" adds up to 3 tasks but SLURM_STEP_NUM_TASKS=4`},
		{"cyclic over nodes", srunEnv("1", "0", "1", "b", "a,b", "1(x2)", "2", "SLURM_DISTRIBUTION", "cyclic"), 7000,
			"SLURM_DISTRIBUTION=cyclic places tasks on the step's 2 nodes otherwise: meshtrain maps ranks to hosts as Slurm's default block distribution places them; start the step with srun --distribution=block"},
		{"placed cyclically without saying so", srunEnv("1", "0", "1", "b", "a,b", "2(x2)", "4"), 7000,
			"SLURM_NODEID=1 but under block distribution rank 1 is task 1 of node 0 (a)"},
		{"on another node", srunEnv("1", "1", "", "b", "a,b", "2(x2)", "4"), 7000,
			"SLURMD_NODENAME=b but under block distribution rank 1 is task 1 of node 0 (a)"},
		{"another local id", srunEnv("1", "0", "0", "a", "a,b", "2(x2)", "4"), 7000,
			"SLURM_LOCALID=0 but under block distribution rank 1 is task 1 of node 0 (a)"},
		{"ports beyond 65535", srunEnv("0", "0", "0", "vm", "vm", "3", "3"), 65534,
			"base port 65534 with up to 3 tasks per node: want ports in 1..65535 (set --slurm-base-port or MESHTRAIN_SLURM_BASE_PORT)"},
		{"a node twice", srunEnv("0", "0", "0", "a", "a,a", "1(x2)", "2"), 7000,
			"duplicate address: worker 0 and worker 1 are both a:7000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FromSlurm(tt.env, tt.base)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "Slurm environment: ") {
				t.Errorf("got %v\nwant an error saying %q", err, tt.want)
			}
		})
	}
}

// FuzzExpandNodeList checks that no list panics or exceeds the bound, and
// that the names of an accepted list, joined by commas, expand to
// themselves.
func FuzzExpandNodeList(f *testing.F) {
	for _, s := range []string{"vm", "node[01-03,07]", "a[1-2],b3", "r[1-2]n[01-02]", "n[1-", "x[3-1]", "a,,b", "n[0-999999999]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		names, err := ExpandNodeList(s)
		if err != nil {
			return
		}
		if len(names) == 0 || len(names) > maxSlurmHosts {
			t.Fatalf("%q: %d names", s, len(names))
		}
		for _, n := range names {
			if n == "" || strings.ContainsAny(n, "[],") || n != strings.TrimSpace(n) {
				t.Fatalf("%q: name %q", s, n)
			}
		}
		again, err := ExpandNodeList(strings.Join(names, ","))
		if err != nil || !slices.Equal(again, names) {
			t.Fatalf("%q: names %q expand to %q, %v", s, names, again, err)
		}
	})
}

// FuzzExpandTasksPerNode checks that no tasks-per-node value panics and
// that an accepted one has counts of at least 1, within the bound.
func FuzzExpandTasksPerNode(f *testing.F) {
	for _, s := range []string{"3", "2(x3),1", "2(x3", "1(x70000)", "0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		counts, err := ExpandTasksPerNode(s)
		if err != nil {
			return
		}
		if len(counts) == 0 || len(counts) > maxSlurmHosts || slices.Min(counts) < 1 || slices.Max(counts) > maxSlurmHosts {
			t.Fatalf("%q: %v", s, counts)
		}
	})
}

// TestSlurmPorts: under srun the ports are the user's base when given,
// else the step's reserved ports (srun --resv-ports), else a base derived
// from the job's ID, so two jobs sharing a node do not meet; the Cluster's
// ListenHint names the port, the job and the flag to change.
func TestSlurmPorts(t *testing.T) {
	twoPerNode := func(changes ...string) func(string) (string, bool) {
		return srunEnv("3", "1", "1", "n2", "n[1-2]", "2(x2)", "4", changes...)
	}
	for _, tt := range []struct {
		name  string
		env   func(string) (string, bool)
		base  int
		peers []string
		hint  []string
	}{
		{"reserved ports", twoPerNode("SLURM_JOB_ID", "1234", "SLURM_STEP_RESV_PORTS", "12000-12001"), 0,
			[]string{"n1:12000", "n1:12001", "n2:12000", "n2:12001"},
			[]string{"port 12001 (task 1 of node n2 in Slurm job 1234, from the step's reserved ports (SLURM_STEP_RESV_PORTS=12000-12001))", "--slurm-base-port"}},
		{"reserved ports, a list longer than needed", twoPerNode("SLURM_JOB_ID", "1234", "SLURM_STEP_RESV_PORTS", "12005,12007-12009"), 0,
			[]string{"n1:12005", "n1:12007", "n2:12005", "n2:12007"}, nil},
		{"from the job ID", twoPerNode("SLURM_JOB_ID", "1234"), 0,
			[]string{"n1:27456", "n1:27457", "n2:27456", "n2:27457"},
			[]string{"port 27457 (task 1 of node n2 in Slurm job 1234, from the job's ID (20000 + 16 × (SLURM_JOB_ID=1234 mod 768) = 27456)) is taken by another job or step on this node",
				"give this job another base with --slurm-base-port (or MESHTRAIN_SLURM_BASE_PORT), or start the step with srun --resv-ports"}},
		{"the next job", twoPerNode("SLURM_JOB_ID", "1235"), 0, []string{"n1:27472", "n1:27473", "n2:27472", "n2:27473"}, nil},
		{"the user's base first", twoPerNode("SLURM_JOB_ID", "1234", "SLURM_STEP_RESV_PORTS", "12000-12001"), 9000,
			[]string{"n1:9000", "n1:9001", "n2:9000", "n2:9001"}, []string{"port 9001", "from the base port 9000 (--slurm-base-port or MESHTRAIN_SLURM_BASE_PORT)"}},
		{"no job ID", twoPerNode(), 0, []string{"n1:7000", "n1:7001", "n2:7000", "n2:7001"}, []string{"Slurm job ?", "the default base 7000"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := FromSlurm(tt.env, tt.base)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.Peers, tt.peers) {
				t.Errorf("peers %q, want %q", c.Peers, tt.peers)
			}
			for _, w := range tt.hint {
				if !strings.Contains(c.ListenHint, w) {
					t.Errorf("ListenHint %q lacks %q", c.ListenHint, w)
				}
			}
		})
	}
	// Jobs whose IDs are less than SlurmJobPortSlots apart have disjoint
	// blocks of ports, every one below the ephemeral range.
	seen := map[int]int{}
	for id := 5000; id < 5000+SlurmJobPortSlots; id++ {
		b := SlurmJobBase(id)
		for p := b; p < b+SlurmJobPortStride; p++ {
			if other, ok := seen[p]; ok {
				t.Fatalf("jobs %d and %d share port %d", other, id, p)
			}
			seen[p] = id
		}
		if b < 1024 || b+SlurmJobPortStride-1 >= 32768 {
			t.Fatalf("job %d: ports %d-%d, want them between 1024 and the ephemeral range (32768)", id, b, b+SlurmJobPortStride-1)
		}
	}
	for _, tt := range []struct {
		env  func(string) (string, bool)
		want string
	}{
		{twoPerNode("SLURM_STEP_RESV_PORTS", "12000"), `SLURM_STEP_RESV_PORTS="12000" reserves 1 ports but a node runs up to 2 tasks: reserve one per task (srun --resv-ports=2), or give --slurm-base-port`},
		{twoPerNode("SLURM_STEP_RESV_PORTS", "12001-12000"), `SLURM_STEP_RESV_PORTS="12001-12000": "12001-12000": want ports or ranges`},
		{twoPerNode("SLURM_JOB_ID", "x"), `SLURM_JOB_ID="x": want a non-negative integer`},
		{srunEnv("0", "0", "0", "n", "n", "17", "17", "SLURM_JOB_ID", "7"), "up to 17 tasks per node, more than the 16 ports a job's ID gives it: give --slurm-base-port"},
	} {
		if _, err := FromSlurm(tt.env, 0); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("got %v, want an error saying %q", err, tt.want)
		}
	}
}
