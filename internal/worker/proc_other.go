//go:build !unix

package worker

import (
	"errors"
	"os"
	"os/exec"
)

// ownGroup: without process groups the command is killed alone.
func ownGroup(*exec.Cmd) {}

// killGroup kills the command (what it started is not reached).
func killGroup(cmd *exec.Cmd) error {
	err := cmd.Process.Kill()
	if errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	return err
}
