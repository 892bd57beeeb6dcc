package tests

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// slurm is a one-node Slurm cluster started by startSlurm.
type slurm struct {
	dir  string   // configuration, state, logs and the jobs' working directory
	home string   // the jobs' $HOME
	env  []string // the clients' environment (SLURM_CONF, PATH with meshtrain)
}

// slurmConf is the configuration of startSlurm's cluster: settings that
// work in a container (no cgroups), everything under the test's directory.
const slurmConf = `ClusterName=meshtrain-test
SlurmctldHost={{host}}(127.0.0.1)
SlurmctldPort={{ctldport}}
SlurmdPort={{dport}}
AuthType=auth/munge
AuthInfo=socket={{dir}}/munge/munge.sock
CredType=cred/munge
SlurmUser={{user}}
SlurmdUser=root
StateSaveLocation={{dir}}/state
SlurmdSpoolDir={{dir}}/spool
SlurmctldPidFile={{dir}}/slurmctld.pid
SlurmdPidFile={{dir}}/slurmd.pid
SlurmctldLogFile={{dir}}/slurmctld.log
SlurmdLogFile={{dir}}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
NodeName={{node}} NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
`

// startSlurm starts munged, slurmctld and slurmd, waits for the node to be
// idle, and registers their end (jobs cancelled, daemons stopped, files
// removed with the test's directory). It skips the test when the daemons
// are not installed or this is not root.
func startSlurm(t *testing.T) *slurm {
	for _, cmd := range []string{"munged", "slurmctld", "slurmd", "srun", "sbatch", "sinfo", "squeue", "scancel"} {
		if _, err := exec.LookPath(cmd); err != nil {
			t.Skipf("%s is not installed: this test needs a real Slurm (Debian: apt-get install slurm-wlm munge)", cmd)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("not root: slurmd must run as root to start tasks as their user")
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	node := host // peers dial each other by node name: it must resolve
	if _, err := net.LookupHost(host); err != nil {
		node = "localhost"
	}
	ports := freePorts(t, 2)
	s := &slurm{dir: t.TempDir(), home: t.TempDir()}
	for _, d := range []string{"munge", "state", "spool"} {
		if err := os.Mkdir(filepath.Join(s.dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	conf := strings.NewReplacer("{{host}}", host, "{{node}}", node, "{{dir}}", s.dir, "{{user}}", u.Username,
		"{{ctldport}}", ports[0][strings.LastIndexByte(ports[0], ':')+1:], "{{dport}}", ports[1][strings.LastIndexByte(ports[1], ':')+1:]).Replace(slurmConf)
	confFile := filepath.Join(s.dir, "slurm.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	s.env = clientEnv(confFile, s.home)

	key := make([]byte, 1024)
	_, _ = rand.Read(key)
	munge := filepath.Join(s.dir, "munge")
	if err := os.WriteFile(filepath.Join(munge, "munge.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	s.daemon(t, "munged", "munged", "-F", "-f", "--key-file="+munge+"/munge.key", "--socket="+munge+"/munge.sock",
		"--pid-file="+munge+"/munged.pid", "--seed-file="+munge+"/munged.seed", "--log-file="+munge+"/munged.log")
	s.waitFor(t, "munged's socket", func() bool { _, err := os.Stat(munge + "/munge.sock"); return err == nil })
	s.daemon(t, "slurmctld", "slurmctld", "-D", "-i", "-f", confFile)
	s.daemon(t, "slurmd", "slurmd", "-D", "-f", confFile, "-N", node)
	s.waitFor(t, "node "+node+" idle", func() bool {
		r := s.run(context.Background(), nil, "sinfo", "-h", "-o", "%T", "-n", node)
		return strings.TrimSpace(r.stdout) == "idle"
	})
	t.Cleanup(func() { s.cancelJobs(t, u.Username) })
	return s
}

// clientEnv is this process's environment with confFile's cluster, home
// as $HOME (the user cache, where MNIST is, kept), meshtrain on $PATH and
// no Slurm or TF_CONFIG variables of its own.
func clientEnv(confFile, home string) []string {
	cache, _ := os.UserCacheDir()
	env := []string{"SLURM_CONF=" + confFile, "HOME=" + home, "XDG_CACHE_HOME=" + cache,
		"PATH=" + filepath.Dir(binary) + string(os.PathListSeparator) + os.Getenv("PATH")}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "SLURM"), k == "TF_CONFIG", k == "HOME", k == "XDG_CACHE_HOME", k == "PATH":
		default:
			env = append(env, kv)
		}
	}
	return env
}

// daemon starts a daemon in the foreground with its output in the test's
// directory, and registers its end (SIGTERM, then SIGKILL after 10 s).
func (s *slurm) daemon(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := os.Create(filepath.Join(s.dir, name+".out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env, cmd.Stdout, cmd.Stderr = s.env, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = out.Close()
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(s.dir, name+".out"))
			t.Logf("%s's output:\n%s", name, log)
		}
	})
}

// waitFor polls cond until it holds, failing the test after 30 s.
func (s *slurm) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			for _, f := range []string{"slurmctld.log", "slurmd.log"} {
				log, _ := os.ReadFile(filepath.Join(s.dir, f))
				t.Logf("%s:\n%s", f, log)
			}
			t.Fatalf("waited 30 s for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cancelJobs cancels the cluster's jobs and waits until none is left, so
// no task outlives the daemons.
func (s *slurm) cancelJobs(t *testing.T, user string) {
	_ = s.run(context.Background(), nil, "scancel", "--user", user)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if r := s.run(context.Background(), nil, "squeue", "-h"); r.err == nil && strings.TrimSpace(r.stdout) == "" {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Errorf("jobs still queued 30 s after scancel")
}

// run runs a Slurm client command with the cluster's environment.
func (s *slurm) run(ctx context.Context, env []string, args ...string) result {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env, cmd.Dir = append(append([]string{}, s.env...), env...), s.dir
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (%v)", err, ctx.Err())
	}
	return result{out.String(), errb.String(), err, time.Since(start)}
}
