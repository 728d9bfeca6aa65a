//go:build unix

package worker

import (
	"errors"
	"os/exec"
	"syscall"
)

// ownGroup has cmd start as the leader of a process group of its own, so
// that what it starts can be killed with it, and a Ctrl-C at cg's terminal
// reaches cg alone (which finishes the message in hand).
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killGroup kills the process group cmd leads.
func killGroup(cmd *exec.Cmd) error {
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}
