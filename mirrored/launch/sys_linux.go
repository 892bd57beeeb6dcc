//go:build linux

package launch

import "syscall"

// sysProcAttr puts a worker in its own process group, so that a terminal's
// Ctrl-C reaches only the launcher (which forwards it), and kills it if the
// launcher dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
